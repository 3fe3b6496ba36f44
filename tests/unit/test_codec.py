"""The bucket encodings: every slot survives a round trip, and compact slots are smaller."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imbucket.adapters.codec import COMPACT, OPENIM, SlotCodec
from imbucket.domain.model import PURGED_SLOT, Message, Revoke, Role, Slot
from imbucket.testing.factories import CONV, message, messages

CODECS = [pytest.param(codec, id=codec.name) for codec in (COMPACT, OPENIM)]
USERS = st.frozensets(st.sampled_from(["bob", "carol", "dave"]), max_size=3)
TEXT = st.text(max_size=5)
MESSAGES = st.builds(
    lambda seq, texts, ints, options: replace(
        message(seq, CONV),
        content=texts[0],
        recv_id=texts[1],
        group_id=texts[2],
        sender_nickname=texts[3],
        ex=texts[4],
        sender_platform_id=ints[0],
        create_time=message(seq, CONV).send_time + ints[1],
        status=ints[2],
        options=options,
    ),
    st.integers(1, 10**12),
    st.tuples(TEXT, TEXT, TEXT, TEXT, TEXT),
    st.tuples(st.integers(0, 9), st.integers(-5, 5), st.integers(0, 3)),
    st.dictionaries(st.sampled_from(["a", "b"]), st.booleans(), max_size=2),
)


def through_json(codec: SlotCodec, seq: int, slot: Slot) -> Slot:
    """slot written by codec, stored as JSON text, and read back at seq."""
    return codec.from_doc(CONV, seq, json.loads(json.dumps(codec.to_doc(slot))))


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=200, deadline=None)
@given(
    message=st.none() | MESSAGES,
    revoked=st.booleans(),
    deleted_by=USERS,
    read_by=USERS,
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_every_slot_survives_a_round_trip(
    codec: SlotCodec,
    message: Message | None,
    revoked: bool,
    deleted_by: frozenset[str],
    read_by: frozenset[str],
    flags: tuple[bool, bool, bool],
) -> None:
    is_read, purged, spilled = flags
    revoke = Revoke("alice", Role.ADMIN, "Alice", 1_700_000_000_123) if revoked else None
    slot = Slot(message, revoke, deleted_by, is_read, purged, read_by, spilled)
    seq = 1 if message is None else message.seq
    assert through_json(codec, seq, slot) == slot


def test_compact_trims_trailing_defaults_and_keeps_odd_times() -> None:
    (message,) = messages(7, 7)
    plain = replace(message, sender_nickname="", sender_platform_id=0, options={}, ex="")
    earlier = replace(message, create_time=message.send_time - 5, ex="x", options={"a": True})
    for stored in (plain, earlier):
        assert through_json(COMPACT, 7, Slot(message=stored)) == Slot(message=stored)
    assert len(COMPACT.to_doc(Slot(message=plain))["m"]) < len(
        COMPACT.to_doc(Slot(message=earlier))["m"]
    )


def test_compact_writes_only_what_differs_from_an_empty_slot() -> None:
    assert COMPACT.to_doc(Slot()) == {}
    assert COMPACT.to_doc(PURGED_SLOT) == {"p": True}
    assert COMPACT.from_doc(CONV, 3, {}) == Slot() == COMPACT.from_doc(CONV, 3, None)


def test_a_compact_bucket_of_a_small_chat_is_a_fraction_of_openims() -> None:
    """A 1:1 chat of 6 messages in a bucket of 100 slots, as stored JSON text (bytes)."""
    stored = {m.seq - 1: Slot(message=m) for m in messages(1, 6)}

    def bucket_bytes(codec: SlotCodec) -> int:
        slots = [codec.to_doc(stored.get(i, Slot())) for i in range(100)]
        return len(json.dumps(slots, separators=(",", ":")).encode())

    compact, openim = bucket_bytes(COMPACT), bucket_bytes(OPENIM)
    assert compact * 5 < openim
    assert compact < 6 * 140 + 100 * 3  # six messages of ~130 bytes, 100 slot frames
