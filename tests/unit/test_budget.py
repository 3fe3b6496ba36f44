"""The size bounds of domain.sizes against the real encodings, and the bucket arithmetic."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imbucket.adapters.codec import message_to_doc, revoke_to_doc
from imbucket.app import open_service
from imbucket.app.settings import load_settings
from imbucket.domain.budget import BucketBounds, TagBudget
from imbucket.domain.errors import ConfigError
from imbucket.domain.model import (
    DEFAULT_LIMITS,
    Draft,
    Limits,
    Message,
    Revoke,
    Role,
    SessionType,
    message_bytes,
    message_bytes_at_most,
)
from imbucket.domain.model import DRAFT_FIELDS as _DRAFT_FIELDS
from imbucket.domain.sizes import entry_bytes, revoke_bytes, text_bytes
from imbucket.testing.factories import CONV, draft

L = 12
# Characters whose stored size differs most between encodings: escaped in JSON, wide in UTF-8.
chars = st.sampled_from(['"', "\\", "\n", "\t", "a", "é", "中", "😀", "\u2028"])
short = st.text(chars, max_size=L)
ints = st.integers(0, 2**63 - 1)


def encodings(doc: dict[str, Any]) -> list[int]:
    """Sizes of doc as compact JSON, PostgreSQL's jsonb text and BSON."""
    compact = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    spaced = json.dumps(doc, ensure_ascii=False, separators=(", ", ": "))
    return [len(compact.encode()), len(spaced.encode()), len(bson.encode(doc))]


messages = st.builds(
    Message,
    conversation_id=st.just(CONV),
    seq=st.integers(1, 2**63 - 1),
    send_id=short,
    client_msg_id=short,
    content=st.text(chars, max_size=200),
    recv_id=short,
    group_id=short,
    server_msg_id=short,
    session_type=st.sampled_from(list(SessionType)),
    content_type=ints,
    send_time=ints,
    create_time=ints,
    status=ints,
    sender_nickname=short,
    sender_platform_id=ints,
    options=st.dictionaries(short, st.booleans(), max_size=4),
    ex=st.text(chars, max_size=50),
)


@settings(max_examples=200, deadline=None)
@given(messages)
def test_message_bytes_bound_every_encoding(message: Message) -> None:
    assert max(encodings(message_to_doc(message))) <= message_bytes(message, L)


@settings(max_examples=200, deadline=None)
@given(messages)
def test_the_cheap_bound_is_never_below_message_bytes(message: Message) -> None:
    assert message_bytes(message, L) <= message_bytes_at_most(message)


@settings(max_examples=200, deadline=None)
@given(messages)
def test_the_cheap_bound_of_a_draft_is_never_below_its_message_bytes(message: Message) -> None:
    drafted = Draft(**{name: getattr(message, name) for name in _DRAFT_FIELDS})
    assert message_bytes(drafted, L) <= message_bytes_at_most(drafted, L)


def test_the_cheap_bound_counts_every_character_at_four_bytes() -> None:
    wide = replace(draft(1), content="\U0001f600" * 100)
    sent = Message(conversation_id=CONV, seq=1, **{f: getattr(wide, f) for f in _DRAFT_FIELDS})
    empty = replace(sent, content="")
    assert message_bytes_at_most(sent) - message_bytes_at_most(empty) == 4 * 100
    assert message_bytes(sent, L) <= message_bytes_at_most(sent)


@settings(max_examples=100, deadline=None)
@given(short, short, ints)
def test_revoke_and_entry_bytes_bound_every_encoding(user: str, nickname: str, time: int) -> None:
    revoke = Revoke(user, Role.APP_ADMIN, nickname, time)
    assert max(encodings(revoke_to_doc(revoke))) <= revoke_bytes(L)
    # One more id in an array: its growth, with a 5-digit BSON index key at worst.
    ids = [user] * 10_000
    for size_with, size_without in zip(
        encodings({"a": ids}), encodings({"a": ids[:-1]}), strict=True
    ):
        assert size_with - size_without <= entry_bytes(L)


def test_text_bytes_count_utf8_and_escapes() -> None:
    assert text_bytes("ab") == 2
    assert text_bytes('"\\\n\r\t') == 10
    assert text_bytes("é😀") == 6


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(['"', "\\", "\n", "\r", "\t", "a", "é", "😀"]), max_size=20))
def test_text_bytes_is_utf8_plus_one_per_escaped_character(value: str) -> None:
    escaped = sum(value.count(char) for char in '"\\\n\r\t')
    assert text_bytes(value) == len(value.encode()) + escaped


def test_a_draft_bounds_the_message_send_makes_of_it() -> None:
    with open_service({"limits": {"max_id_length": 64}}) as svc:
        (sent,) = svc.send(CONV, [replace(draft(1), content='"x"')])
    assert message_bytes(sent, 64) <= message_bytes(replace(draft(1), content='"x"'), 64)


def test_the_default_bucket_fits_8_mib_with_a_full_slot_of_deleters() -> None:
    bounds = BucketBounds.of(100, DEFAULT_LIMITS)
    # The numbers docs/buckets.md walks through.
    assert (bounds.entry_bytes, bounds.slot_bytes, bounds.frame_bytes) == (812, 75_246, 917)
    assert bounds.fixed_bytes == 7_525_517
    assert bounds.deleters_per_bucket == 1062
    assert bounds.worst_case_bytes <= 8 * 1024 * 1024
    assert bounds.budget() == TagBudget(1000, 1062, 2)
    bounds.check()


@pytest.mark.parametrize(
    "config",
    [
        {"store": {"bucket_size": 200}},
        {"limits": {"max_id_length": 1000}},
        {"limits": {"max_message_bytes": 1024 * 1024}},
        {"store": {"max_deleters_per_slot": 2000}},
        {"store": {"max_bucket_bytes": 4 * 1024 * 1024}},
    ],
)
def test_bucket_settings_that_cannot_fit_are_a_config_error(config: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"store\.max_bucket_bytes"):
        load_settings(config)
    for backend in ("sql-bucket", "mongo-bucket"):
        with pytest.raises(ConfigError):
            load_settings({**config, "store": {**config.get("store", {}), "backend": backend}})
    # Rows have no buckets to bound; a bigger limit makes the same numbers fit.
    load_settings({**config, "store": {**config.get("store", {}), "backend": "sql-row"}})
    bigger = {**config.get("store", {}), "max_bucket_bytes": 256 * 1024 * 1024}
    load_settings({**config, "store": bigger})


def test_the_store_gets_its_budget_from_the_settings() -> None:
    config = {"store": {"bucket_size": 10, "max_deleters_per_slot": 7}}
    with open_service(config) as service:
        expected = BucketBounds.of(10, Limits(), 7).budget()
        assert service.store.budget == expected  # type: ignore[attr-defined]
        assert expected.deleters_per_bucket > 7
        assert service.limits.max_message_bytes == 70 * 1024
