"""The streaming scans of MessageStore and SeqStore: everything stored, once, in bounded pages."""

from __future__ import annotations

from typing import Any

from imbucket.app import MessageService
from imbucket.domain.model import Slot
from imbucket.domain.scan import Counters, SendClaim, UserSeqs
from imbucket.testing.factories import messages
from imbucket.testing.migration_data import CLIENT_MSG_IDS, CONVERSATIONS, GROUP, USERS, fill
from imbucket.testing.rows import EARLY_TAGS, SEND_CLAIMS, needs


def _scan_slots(service: MessageService, limit: int) -> tuple[list[Any], list[int]]:
    """Every scanned (conversation, seq, slot) and the size of every page."""
    found: list[Any] = []
    sizes: list[int] = []
    cursor = None
    for _ in range(10_000):
        page = service.store.scan(cursor, limit)
        sizes.append(len(page.slots))
        found += [(s.conversation_id, s.seq, s.slot) for s in page.slots]
        cursor = page.cursor
        if cursor is None:
            return found, sizes
    raise AssertionError("the scan did not end")


def _scan_rows(scan: Any, limit: int) -> list[Any]:
    rows: list[Any] = []
    cursor = None
    for _ in range(10_000):
        page = scan(cursor, limit)
        assert len(page.rows) <= limit
        rows += page.rows
        cursor = page.cursor
        if cursor is None:
            return rows
    raise AssertionError("the scan did not end")


def _stored(service: MessageService) -> dict[tuple[str, int], Slot]:
    """Every non-empty slot, read with get."""
    stored = {}
    for conversation in CONVERSATIONS:
        last = service.max_seq(conversation) + 5
        for seq, slot in service.store.get(conversation, list(range(1, last + 1))).items():
            stored[(conversation, seq)] = slot
    return stored


def test_an_empty_store_scans_empty(service: MessageService) -> None:
    page = service.store.scan(None, 10)
    assert (page.slots, page.cursor) == ((), None)
    for scan in (service.seqs.scan_counters, service.seqs.scan_user_seqs, service.seqs.scan_sends):
        assert _scan_rows(scan, 10) == []


@needs(EARLY_TAGS)
def test_a_scan_returns_every_stored_slot_once_as_get_shows_it(service: MessageService) -> None:
    fill(service)
    for limit in (7, 1000):
        found, _ = _scan_slots(service, limit)
        keys = [(conversation, seq) for conversation, seq, _ in found]
        assert len(keys) == len(set(keys))
        assert {(c, s): slot for c, s, slot in found} == _stored(service)


def test_scan_pages_stay_bounded_in_a_large_conversation(service: MessageService) -> None:
    service.ingest(GROUP, messages(1, 1000, GROUP))
    found, sizes = _scan_slots(service, 10)
    assert len(found) == 1000
    assert max(sizes) <= max(10, service.store.layout.size)
    assert len(sizes) >= 1000 // max(10, service.store.layout.size)


@needs(EARLY_TAGS, SEND_CLAIMS)
def test_seq_scans_return_every_counter_watermark_and_claim(service: MessageService) -> None:
    fill(service)
    seqs = service.seqs
    counters = _scan_rows(seqs.scan_counters, 2)
    assert set(counters) == {Counters(c, seqs.max_seq(c), seqs.min_seq(c)) for c in CONVERSATIONS}
    users = _scan_rows(seqs.scan_user_seqs, 2)
    expected = {
        UserSeqs(c, u, seqs.user_min_seq(c, u), seqs.read_seq(c, u))
        for c in CONVERSATIONS
        for u in USERS
        if seqs.user_min_seq(c, u) or seqs.read_seq(c, u)
    }
    assert expected and {u for u in users if u.min_seq or u.read_seq} == expected
    assert len(users) == len(set(users))
    sends = _scan_rows(seqs.scan_sends, 2)
    assert {SendClaim(s.conversation_id, s.client_msg_id, s.seq) for s in sends} == {
        SendClaim(GROUP, cid, seq)
        for cid, seq in seqs.sent_seqs(GROUP, list(CLIENT_MSG_IDS)).items()
    }
    assert all(s.claimed_at > 0 for s in sends)  # the claim time travels with the claim
    assert len(sends) == len(CLIENT_MSG_IDS)
