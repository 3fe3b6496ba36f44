"""Idempotent insert, conflicts, purge finality and seq bookkeeping on the ingest path."""

from __future__ import annotations

from dataclasses import replace

from imbucket.app import MessageService
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, full_message, message, messages


def contents(entries: list[MessageView | Tombstone]) -> list[str | TombstoneReason]:
    return [e.content if isinstance(e, MessageView) else e.reason for e in entries]


def test_ingest_stores_messages_and_raises_max_seq(service: MessageService) -> None:
    result = service.ingest(CONV, messages(1, 5))
    assert result.inserted == (1, 2, 3, 4, 5)
    assert service.max_seq(CONV) == 5
    assert contents(service.pull_range(CONV, "bob", 1, 5)) == [f"message {s}" for s in range(1, 6)]


def test_every_openim_field_is_kept(service: MessageService) -> None:
    """Face URL, msg_from, the message's is_read, push, at-list, attached info: read back equal."""
    stored = [full_message(seq) for seq in (1, 2, 3, 150)]
    service.ingest(CONV, stored)
    found = service.store.get(CONV, [1, 2, 3, 150])
    assert [found[m.seq].message for m in stored] == stored
    again = service.ingest(CONV, stored)
    assert again.duplicates == (1, 2, 3, 150)


def test_identical_redelivery_changes_nothing(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 150))
    again = service.ingest(CONV, messages(1, 150))
    assert again.inserted == ()
    assert again.duplicates == tuple(range(1, 151))
    assert service.stats().messages == 150


def test_different_message_for_occupied_seq_is_a_conflict(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 3))
    impostor = replace(message(2), content="not the original")
    result = service.ingest(CONV, [impostor, message(4)])
    assert result.conflicts == (2,)
    assert result.inserted == (4,)
    view = service.pull(CONV, "bob", [2])[0]
    assert isinstance(view, MessageView)
    assert view.content == "message 2"


def test_batch_spanning_two_buckets(service: MessageService) -> None:
    result = service.ingest(CONV, messages(51, 150))
    assert len(result.inserted) == 100
    located = service.inspect(CONV, 150)
    assert (located.doc_index, located.slot_index) == (1, 49)
    assert located.slot is not None and located.slot.message == message(150)


def test_redelivery_into_partly_filled_bucket_reports_each_seq(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 10))
    result = service.ingest(CONV, messages(5, 15))
    assert result.duplicates == tuple(range(5, 11))
    assert result.inserted == tuple(range(11, 16))


def test_redelivery_does_not_touch_tags(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 3))
    service.delete_for_me(CONV, [2], "bob")
    service.ingest(CONV, messages(1, 3))
    assert service.pull(CONV, "bob", [2]) == [Tombstone(2, TombstoneReason.DELETED)]


def test_out_of_order_ingest_leaves_explicit_holes(service: MessageService) -> None:
    service.ingest(CONV, [message(7), message(3)])
    assert service.max_seq(CONV) == 7
    entries = service.pull_range(CONV, "bob", 1, 8)
    assert contents(entries) == [
        TombstoneReason.MISSING,
        TombstoneReason.MISSING,
        "message 3",
        TombstoneReason.MISSING,
        TombstoneReason.MISSING,
        TombstoneReason.MISSING,
        "message 7",
        TombstoneReason.UNALLOCATED,
    ]
    service.ingest(CONV, messages(1, 7))
    assert contents(service.pull_range(CONV, "bob", 1, 7)) == [f"message {s}" for s in range(1, 8)]


def test_get_returns_only_seqs_with_something_stored(service: MessageService) -> None:
    service.ingest(CONV, [message(1), message(3)])
    service.delete_for_me(CONV, [2], "bob")
    slots = service.store.get(CONV, [1, 2, 3, 4, 250])
    assert sorted(slots) == [1, 2, 3]
    assert slots[2].message is None and slots[2].deleted_by == {"bob"}


def test_conversations_are_isolated(service: MessageService) -> None:
    service.ingest("si_a_b", [message(1, "si_a_b", content="private")])
    service.ingest("si_a_bb", [message(1, "si_a_bb", content="other")])
    assert contents(service.pull("si_a_b", "a", [1])) == ["private"]
    assert contents(service.pull("si_a_bb", "a", [1])) == ["other"]
    assert service.max_seq("si_a") == 0


def test_stats_count_messages_and_bytes(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 120))
    stats = service.stats()
    assert stats.messages == 120
    assert stats.documents >= 1
    assert stats.data_bytes > 0
    assert stats.index_bytes > 0
