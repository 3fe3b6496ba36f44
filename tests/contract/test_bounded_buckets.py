"""Bounded buckets: a hot message deleted by thousands of users, spilled deleters, purge."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.domain.budget import (
    DEFAULT_MAX_BUCKET_BYTES,
    DEFAULT_MAX_DELETERS_PER_SLOT,
    BucketBounds,
)
from imbucket.domain.errors import ContentTooLarge
from imbucket.domain.model import (
    Actor,
    Limits,
    Message,
    OfflinePush,
    Role,
    SessionType,
    message_bytes,
)
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason, project
from imbucket.ports.bucket_repository import BucketRepository
from imbucket.testing.concurrency import run_together
from imbucket.testing.factories import CONV, draft, message, messages
from imbucket.testing.rows import BUCKETS, SLOW, SPILL, backends, examples, needs

HOT_DELETERS = 5_000
WORKERS = 4
OWNER = Actor("olivia", Role.OWNER)


def bucket_repository(service: MessageService) -> BucketRepository | None:
    """The repository of a bucket store (the BUCKETS capability), None on other rows."""
    repository = getattr(service.store, "repository", None)
    return repository if isinstance(repository, BucketRepository) else None


def reasons(service: MessageService, seq: int, viewers: list[str]) -> set[Any]:
    """What each viewer sees at seq: a tombstone reason, or "message"."""
    seen: set[Any] = set()
    for viewer in viewers:
        (entry,) = service.pull(CONV, viewer, [seq])
        seen.add(entry.reason if isinstance(entry, Tombstone) else "message")
    return seen


@pytest.fixture
def capped(open_backend: Any, backend_config: dict[str, Any]) -> Callable[[int], MessageService]:
    """Open a service on this row keeping at most cap deleters inline per slot."""

    def open_capped(cap: int) -> MessageService:
        service: MessageService = open_backend(
            store={**backend_config["store"], "max_deleters_per_slot": cap}
        )
        return service

    return open_capped


def in_parallel(users: list[str], work: Any) -> list[Any]:
    """work(user) for every user, spread over WORKERS threads started together."""
    shares = run_together(WORKERS, lambda n: [work(user) for user in users[n::WORKERS]])
    return [result for share in shares for result in share]


# The longest test of the suite on the mongoeco emulator, whose cost per command grows with a
# document's array (mongo-row's del_list): it gets a budget of its own, and on the emulator
# the share of a SLOW row.
@needs(SPILL)
@pytest.mark.timeout(1500)
def test_a_hot_group_message_deleted_by_5000_users(
    service: MessageService, row_examples: Callable[[int], int], imbucket_emulated_server: bool
) -> None:
    service.ingest(CONV, messages(1, 3))
    # A SLOW row takes a share of them: still more than a slot keeps inline, so some spill.
    if imbucket_emulated_server:
        count = examples(HOT_DELETERS, frozenset({SLOW}))
    else:
        count = row_examples(HOT_DELETERS)
    users = [f"user-{n:04d}" for n in range(count)]
    assert len(users) > DEFAULT_MAX_DELETERS_PER_SLOT
    deleted = in_parallel(users, lambda user: service.delete_for_me(CONV, [2], user))
    assert deleted == [1] * len(users)

    # A pull is the viewer's watermarks, one store read shared by every viewer, and the
    # pure projection: check the read once and project it for every deleter, then
    # pull for real for a sample (each read of the hot slot carries all its deleters).
    stored = service.store.get(CONV, [2])[2]
    assert stored.deleted_by == set(users)
    marks = service.seqs.watermarks(CONV, "bystander")
    views = {entry.reason for user in users for entry in project(user, [2], {2: stored}, marks)}
    assert views == {TombstoneReason.DELETED}
    sample = [*users[:5], *users[-5:], *users[::250]]
    assert reasons(service, 2, sample) == {TombstoneReason.DELETED}
    assert reasons(service, 2, ["bystander"]) == {"message"}
    assert reasons(service, 1, sample) == {"message"}

    again = users[::97]  # early (inline) and late (spilled) deleters alike
    assert [service.delete_for_me(CONV, [2], user) for user in again] == [0] * len(again)
    assert service.store.get(CONV, [2])[2] == stored

    repository = bucket_repository(service)
    if repository is not None:
        doc_id = service.layout.doc_id(CONV, 2)
        size = repository.bucket_bytes(doc_id)
        assert size is not None and size <= DEFAULT_MAX_BUCKET_BYTES
        inline = repository.read({doc_id: [1]})[doc_id][1]
        assert 0 < len(inline.deleted_by) <= DEFAULT_MAX_DELETERS_PER_SLOT
        assert inline.spilled


@needs(SPILL)
def test_deleters_beyond_a_small_cap_spill_and_purge_drops_them(
    capped: Callable[[int], MessageService],
) -> None:
    service = capped(3)
    service.ingest(CONV, messages(1, 5))
    users = [f"u{n}" for n in range(10)]
    assert [service.delete_for_me(CONV, [2], user) for user in users] == [1] * 10
    assert [service.delete_for_me(CONV, [2], user) for user in ("u0", "u9")] == [0, 0]
    assert service.delete_for_me(CONV, [2, 3], "u9") == 1  # 2 already (spilled), 3 new
    assert reasons(service, 2, users) == {TombstoneReason.DELETED}
    assert reasons(service, 3, ["u9"]) == {TombstoneReason.DELETED}
    assert reasons(service, 2, ["bystander"]) == {"message"}
    assert service.store.get(CONV, [2])[2].deleted_by == set(users)

    repository = bucket_repository(service)
    doc_id = service.layout.doc_id(CONV, 2)
    if repository is not None:
        inline = repository.read({doc_id: [1]})[doc_id][1]
        assert len(inline.deleted_by) == 3 and inline.spilled
        assert len(repository.read_spilled({doc_id: [1]})[doc_id][1]) == 7

    assert service.purge(CONV, [2], OWNER) == 1
    assert reasons(service, 2, [*users, "bystander"]) == {TombstoneReason.PURGED}
    assert service.delete_for_me(CONV, [2], "u10") == 0
    assert service.purge(CONV, [2], OWNER) == 0
    assert service.ingest(CONV, [message(2)]).purged == (2,)
    assert reasons(service, 2, ["u0", "u10"]) == {TombstoneReason.PURGED}
    assert reasons(service, 3, ["u9", "u0"]) == {TombstoneReason.DELETED, "message"}
    if repository is not None:
        assert repository.read_spilled({doc_id: [1]}) == {}


@needs(SPILL)
def test_concurrent_deleters_of_one_slot_lose_nothing_across_the_cap(
    capped: Callable[[int], MessageService],
) -> None:
    service = capped(5)
    service.ingest(CONV, messages(1, 2))
    users = [f"u{n:03d}" for n in range(120)]
    assert in_parallel(users, lambda user: service.delete_for_me(CONV, [1, 2], user)) == [2] * 120
    slots = service.store.get(CONV, [1, 2])
    assert slots[1].deleted_by == slots[2].deleted_by == set(users)
    repository = bucket_repository(service)
    if repository is not None:
        doc_id = service.layout.doc_id(CONV, 1)
        inline = repository.read({doc_id: [0, 1]})[doc_id]
        assert all(len(slot.deleted_by) <= 5 for slot in inline.values())


def test_content_up_to_64_kib_is_stored_and_more_is_refused_before_anything_is_written(
    service: MessageService,
) -> None:
    limit = service.limits.max_content_bytes
    assert limit == 64 * 1024
    service.ingest(CONV, [message(1, content="x" * limit)])
    (sent,) = service.send(CONV, [replace(draft(2), content="é" * (limit // 2))])
    oversized = {
        "content": lambda: service.ingest(CONV, [message(3, content="x" * (limit + 1))]),
        "multi-byte content": lambda: service.send(
            CONV, [replace(draft(3), content="é" * (limit // 2 + 1))]
        ),
        "message": lambda: service.ingest(CONV, [message(3, content="x" * limit, ex="y" * 8192)]),
        # Stored escaped, each quote takes two bytes: 128 KiB.
        "draft": lambda: service.send(CONV, [replace(draft(3), content='"' * limit)]),
    }
    for name, call in oversized.items():
        with pytest.raises(ContentTooLarge):
            call()
        assert service.max_seq(CONV) == 2, name
    entries = service.pull(CONV, "bob", [1, 2, 3])
    assert [len(e.content) for e in entries if isinstance(e, MessageView)] == [limit, limit // 2]
    assert entries[1].seq == sent.seq == 2
    assert isinstance(entries[2], Tombstone) and entries[2].reason == TombstoneReason.UNALLOCATED


# ---- the size bound ------------------------------------------------------------------------

# The most expensive character per stored byte: 4 bytes of UTF-8 in every encoding.
WIDE = "😀"
ID_LENGTH = 12
WORST_CONV = "sg_" + WIDE * (ID_LENGTH - 3)


def wide_id(tag: str) -> str:
    return WIDE * (ID_LENGTH - len(tag)) + tag


def worst_message(seq: int) -> Message:
    """A message as large as its limits allow: wide ids, escaped content, the largest ints."""
    big = 2**63 - 1
    return Message(
        conversation_id=WORST_CONV,
        seq=seq,
        send_id=wide_id("s"),
        client_msg_id=wide_id(str(seq)),
        content='"' * 300,  # each quote is stored escaped, as two bytes
        recv_id=wide_id("r"),
        group_id=wide_id("g"),
        server_msg_id=wide_id("m"),
        session_type=SessionType.GROUP,
        content_type=big,
        send_time=big,
        create_time=big,
        status=big,
        sender_nickname=wide_id("n"),
        sender_platform_id=big,
        options={wide_id("a"): False, wide_id("b"): False},
        ex="\\" * 100,
        sender_face_url=wide_id("f"),
        msg_from=big,
        is_read=True,
        offline_push=OfflinePush(wide_id("t"), wide_id("d"), wide_id("e"), wide_id("p"), True),
        at_user_id_list=(wide_id("u"), wide_id("v")),
        attached_info=wide_id("i"),
    )


@needs(SPILL)
@pytest.mark.parametrize("backend_config", backends(BUCKETS), indirect=True)
def test_the_worst_bucket_the_limits_allow_stays_under_the_configured_size(
    open_backend: Any, backend_config: dict[str, Any]
) -> None:
    """Every slot at its largest and the bucket's deleter budget spent, on each engine."""
    message_bytes_limit = message_bytes(worst_message(1), ID_LENGTH)
    limits = Limits(ID_LENGTH, 300, 1000, message_bytes_limit)
    unlimited = BucketBounds.of(4, limits, deleters_per_slot=2, max_bucket_bytes=2**40)
    limit = unlimited.fixed_bytes + 3 * unlimited.entry_bytes  # 3 of the longest deleters
    bounds = BucketBounds.of(4, limits, deleters_per_slot=2, max_bucket_bytes=limit)
    assert bounds.deleters_per_bucket == 3
    service: MessageService = open_backend(
        store={
            **backend_config["store"],
            "bucket_size": 4,
            "max_deleters_per_slot": 2,
            "max_bucket_bytes": limit,
        },
        limits={
            "max_id_length": ID_LENGTH,
            "max_content_bytes": 300,
            "max_message_bytes": message_bytes_limit,
        },
    )
    service.ingest(WORST_CONV, [worst_message(5)])  # allocates 1..4 for the early readers
    for reader in (wide_id("x"), wide_id("y")):
        assert service.mark_read(WORST_CONV, [1, 2, 3, 4], reader) == 4
    assert service.ingest(WORST_CONV, [worst_message(s) for s in (1, 2, 3, 4)]).inserted
    owner = Actor(wide_id("o"), Role.OWNER)
    for seq in (1, 2, 3, 4):
        assert service.revoke(WORST_CONV, seq, owner, nickname=wide_id("v"))
        for n in range(3):
            assert service.delete_for_me(WORST_CONV, [seq], wide_id(f"d{n}")) == 1

    repository = bucket_repository(service)
    assert repository is not None
    doc_id = service.layout.doc_id(WORST_CONV, 1)
    inline = repository.read({doc_id: [0, 1, 2, 3]})[doc_id].values()
    assert sum(len(slot.deleted_by) for slot in inline) == 3  # the budget, all the longest ids
    assert all(slot.spilled and len(slot.read_by) == 2 and slot.revoke for slot in inline)
    size = repository.bucket_bytes(doc_id)
    assert size is not None
    # The bound holds, and is not loose: the worst bucket comes close to it.
    assert bounds.worst_case_bytes // 2 < size <= bounds.worst_case_bytes <= limit
