"""Seq allocation and concurrent writers."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator

import pytest

from imbucket.app import MessageService
from imbucket.domain.projection import MessageView
from imbucket.testing.concurrency import WRITERS, run_together
from imbucket.testing.factories import CONV, draft, messages


@pytest.fixture(autouse=True)
def _frequent_thread_switches() -> Iterator[None]:
    """Switch threads often so that races between round trips really happen."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_send_allocates_dense_seqs_and_stamps_server_fields(service: MessageService) -> None:
    sent = service.send(CONV, [draft(1), draft(2, send_id="bob")])
    assert [m.seq for m in sent] == [1, 2]
    assert all(m.server_msg_id and m.send_time > 0 for m in sent)
    assert len({m.server_msg_id for m in sent}) == 2
    assert service.send(CONV, [draft(3)])[0].seq == 3
    assert service.max_seq(CONV) == 3
    entries = service.pull_latest(CONV, "carol")
    assert [e.content for e in entries if isinstance(e, MessageView)] == [
        "draft 1",
        "draft 2",
        "draft 3",
    ]


def test_send_of_nothing_allocates_nothing(service: MessageService) -> None:
    assert service.send(CONV, []) == []
    assert service.max_seq(CONV) == 0


def test_concurrent_allocations_never_share_a_seq(service: MessageService) -> None:
    def allocate(index: int) -> list[int]:
        seqs: list[int] = []
        for _ in range(25):
            first = service.seqs.allocate(CONV, index % 3 + 1)
            seqs.extend(range(first, first + index % 3 + 1))
        return seqs

    allocated = [seq for batch in run_together(WRITERS, allocate) for seq in batch]
    assert len(allocated) == len(set(allocated))
    assert sorted(allocated) == list(range(1, len(allocated) + 1))
    assert service.max_seq(CONV) == len(allocated)


def test_concurrent_overlapping_ingest_stores_each_message_once(service: MessageService) -> None:
    conversation = "sg_race"
    wanted = messages(1, 300, conversation)

    def ingest(index: int) -> tuple[int, ...]:
        rng = random.Random(index)
        start = rng.randrange(0, 200)
        batch = wanted[start : start + 100]
        inserted: list[int] = []
        for chunk in (batch[:37], batch[37:], wanted[:100], wanted[200:]):
            inserted.extend(service.ingest(conversation, chunk).inserted)
        return tuple(inserted)

    inserted = [seq for batch in run_together(WRITERS, ingest) for seq in batch]
    assert sorted(inserted) == list(range(1, 301))
    slots = service.store.get(conversation, list(range(1, 301)))
    assert {seq: slot.message for seq, slot in slots.items()} == {m.seq: m for m in wanted}
    assert service.stats().messages == 300


def test_concurrent_sends_get_distinct_seqs(service: MessageService) -> None:
    def send(index: int) -> list[int]:
        return [m.seq for m in service.send(CONV, [draft(index * 10 + k) for k in range(5)])]

    seqs = sorted(seq for batch in run_together(WRITERS, send) for seq in batch)
    assert seqs == list(range(1, WRITERS * 5 + 1))
    assert service.stats().messages == WRITERS * 5


def test_concurrent_tag_writers_on_a_new_bucket_lose_nothing(service: MessageService) -> None:
    service.seqs.raise_max_seq(CONV, 10)

    def delete(index: int) -> int:
        return service.delete_for_me(CONV, [index % 10 + 1, 10], f"user{index}")

    run_together(WRITERS, delete)
    deleters = service.store.get(CONV, [10])[10].deleted_by
    assert deleters == {f"user{i}" for i in range(WRITERS)}
