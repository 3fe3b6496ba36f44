"""Pulls: one entry per requested seq, in order, with explicit tombstones."""

from __future__ import annotations

from imbucket.app import MessageService
from imbucket.domain.model import Actor, Role
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, messages


def test_pull_keeps_the_requested_order_across_buckets(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 250))
    order = [250, 3, 101, 100, 3, 199]
    entries = service.pull(CONV, "bob", order)
    assert [e.seq for e in entries] == [250, 3, 101, 100, 199]
    assert all(isinstance(e, MessageView) for e in entries)


def test_pull_latest_returns_the_newest_ascending(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 130))
    entries = service.pull_latest(CONV, "bob", 20)
    assert [e.seq for e in entries] == list(range(111, 131))


def test_pull_latest_of_empty_conversation_is_empty(service: MessageService) -> None:
    assert service.pull_latest("sg_empty", "bob") == []


def test_every_tombstone_reason_in_one_pull(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 6))
    service.seqs.raise_max_seq(CONV, 7)  # seq 7 allocated but never persisted
    service.clear_history(CONV, "dave")  # dave's floor is now 8
    service.ingest(CONV, messages(8, 9))
    service.purge(CONV, [8], Actor("olivia", Role.OWNER))
    service.delete_for_me(CONV, [9], "dave")
    dave = service.pull(CONV, "dave", [1, 7, 8, 9, 10])
    assert dave == [
        Tombstone(1, TombstoneReason.CLEARED),
        Tombstone(7, TombstoneReason.CLEARED),
        Tombstone(8, TombstoneReason.PURGED),
        Tombstone(9, TombstoneReason.DELETED),
        Tombstone(10, TombstoneReason.UNALLOCATED),
    ]
    bob = service.pull(CONV, "bob", [7, 9])
    assert bob[0] == Tombstone(7, TombstoneReason.MISSING)
    assert isinstance(bob[1], MessageView)
