"""CachedViews and the invalidating decorators decide, on a recording cache (a port stub)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.cached_views import (
    CachedViews,
    InvalidatingReadMarks,
    InvalidatingSeqStore,
    invalidating_fresh_sends,
)
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app.views import SeparateViews
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import InsertResult, Message, Pick, Slot, Watermarks
from imbucket.domain.tags import Guard
from imbucket.ports.fresh_sends import FreshSends, StoringFreshSends
from imbucket.ports.message_cache import ViewCache, ViewRead
from imbucket.ports.seq_store import SeqStore
from imbucket.testing.factories import CONV, message, messages
from tests.unit.test_cached_store import RecordingCache


class RecordingViews(RecordingCache):
    """RecordingCache plus cached watermarks (one entry for every viewer, enough here)."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: Watermarks | None = None
        self.dropped: list[str | None] = []

    def get_view(self, conversation_id: str, viewer: str, pick: Pick) -> ViewRead:
        self.calls.append(("view", list(pick.seqs)))
        if self.marks is None:
            return ViewRead(ticket=self.ticket)
        # Listed seqs come back whether shown or not: the caller applies the domain's rule.
        wanted = pick.seqs or pick.of(self.marks)
        slots = {s: self.slots[s] for s in wanted if s in self.slots}
        return ViewRead(self.marks, slots, self.ticket)

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        assert ticket == self.ticket
        self.calls.append(("put_view", list(slots)))
        self.marks = marks or self.marks
        self.slots.update(slots)

    def invalidate_marks(self, conversation_id: str, user_id: str | None = None) -> bool:
        self.dropped.append(user_id)
        self.marks = None
        return True


class BrokenSeqs(MemorySeqStore):
    """The raise lands, then the driver fails."""

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        super().raise_user_min_seq(conversation_id, user_id, seq)
        raise StoreUnavailable("connection lost")


@pytest.fixture
def cache() -> RecordingViews:
    return RecordingViews()


def views(cache: RecordingViews, seqs: SeqStore) -> tuple[CachedViews, BucketMessageStore]:
    store = BucketMessageStore(MemoryBucketRepository())
    store.insert(CONV, messages(1, 5))
    seqs.raise_max_seq(CONV, 6)
    return CachedViews(SeparateViews(store, seqs), store, cache), store


def test_the_stub_is_a_view_cache(cache: RecordingViews) -> None:
    assert isinstance(cache, ViewCache)


def test_a_watermark_miss_reads_the_store_view_and_fills_marks_and_stored_slots(
    cache: RecordingViews,
) -> None:
    cached, _ = views(cache, MemorySeqStore())
    marks, slots = cached.view(CONV, "bob", Pick(latest=20))
    assert marks == Watermarks(6, 0, 0) and sorted(slots) == [1, 2, 3, 4, 5]
    assert cache.calls == [("view", []), ("put_view", [1, 2, 3, 4, 5])]  # never seq 6's hole
    assert cache.marks == marks


def test_cached_marks_read_only_the_missing_slots_and_ignore_what_they_do_not_show(
    cache: RecordingViews,
) -> None:
    cached, store = views(cache, MemorySeqStore())
    cache.marks = Watermarks(6, 3, 0)  # seqs 1 and 2 cleared for everyone
    cache.slots = store.get(CONV, [1, 2, 3, 4])
    _, slots = cached.view(CONV, "bob", Pick(seqs=(1, 2, 3, 5)))
    assert sorted(slots) == [3, 5]
    assert cache.calls == [("view", [1, 2, 3, 5]), ("put_view", [5])]


def test_no_ticket_no_fill(cache: RecordingViews) -> None:
    cache.ticket = None  # the cache could not be read
    cached, _ = views(cache, MemorySeqStore())
    assert cached.view(CONV, "bob", Pick(latest=3))[0] == Watermarks(6, 0, 0)
    assert cache.calls == [("view", [])]


Raise = Callable[[SeqStore], object]
RAISES: dict[str, tuple[Raise, str | None]] = {
    "allocate": (lambda s: s.allocate(CONV, 1), None),
    "raise_max_seq": (lambda s: s.raise_max_seq(CONV, 9), None),
    "raise_min_seq": (lambda s: s.raise_min_seq(CONV, 3), None),
    "raise_user_min_seq": (lambda s: s.raise_user_min_seq(CONV, "bob", 3), "bob"),
}


@pytest.mark.parametrize("name", RAISES)
def test_each_watermark_write_drops_its_cached_part_after_the_write(
    name: str, cache: RecordingViews
) -> None:
    write, part = RAISES[name]
    seqs = InvalidatingSeqStore(MemorySeqStore(), cache)
    cache.marks = Watermarks(6, 0, 0)
    write(seqs)
    assert cache.dropped == [part] and cache.marks is None
    cache.dropped.clear()
    seqs.raise_read_seq(CONV, "bob", 5)  # not a watermark
    assert cache.dropped == []


def test_a_raise_that_moves_nothing_drops_nothing(cache: RecordingViews) -> None:
    seqs = InvalidatingSeqStore(MemorySeqStore(), cache)
    seqs.raise_max_seq(CONV, 9)
    cache.dropped.clear()
    assert seqs.raise_max_seq(CONV, 5) == 9  # a redelivery
    assert seqs.raise_max_seq(CONV, 9) == 9  # equal: it may have been this call's
    assert cache.dropped == [None]


def test_a_write_that_fails_half_way_still_drops(cache: RecordingViews) -> None:
    seqs = InvalidatingSeqStore(BrokenSeqs(), cache)
    with pytest.raises(StoreUnavailable):
        seqs.raise_user_min_seq(CONV, "bob", 4)
    assert cache.dropped == ["bob"]
    assert seqs.user_min_seq(CONV, "bob") == 4


class Step:
    """A fresh step that notes what the cache had dropped while it ran (its transaction)."""

    def __init__(self, cache: RecordingViews, fails: bool = False) -> None:
        self.cache = cache
        self.fails = fails
        self.dropped_inside: list[list[str | None]] = []

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        self.dropped_inside.append(list(self.cache.dropped))
        if self.fails:
            raise StoreUnavailable("connection lost")
        return {cid: seq for seq, cid in enumerate(client_msg_ids, 7)}


class StoringStep(Step):
    """A Step that also stores the messages through the caller's insert."""

    def store_fresh(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        at: int,
        insert: Callable[[str, list[Message]], InsertResult],
        store_insert: Callable[[str, list[Message]], InsertResult] | None = None,
        since: int = 0,
    ) -> int | None:
        self.dropped_inside.append(list(self.cache.dropped))
        insert(conversation_id, list(messages))
        self.dropped_inside.append(list(self.cache.dropped))
        if self.fails:
            raise StoreUnavailable("connection lost")
        return 7


def stored(conversation_id: str, pending: list[Message]) -> InsertResult:
    return InsertResult(inserted=tuple(m.seq for m in pending))


def test_store_fresh_is_offered_only_where_the_backend_stores(cache: RecordingViews) -> None:
    claiming = invalidating_fresh_sends(Step(cache), cache)
    storing = invalidating_fresh_sends(StoringStep(cache), cache)
    assert isinstance(claiming, FreshSends) and not isinstance(claiming, StoringFreshSends)
    assert isinstance(storing, StoringFreshSends)


@pytest.mark.parametrize("fails", [False, True], ids=["returned", "raised"])
def test_a_fresh_claim_drops_the_watermarks_after_the_step(
    cache: RecordingViews, fails: bool
) -> None:
    step = Step(cache, fails)
    fresh = invalidating_fresh_sends(step, cache)
    cache.marks = Watermarks(6, 0, 0)
    if fails:
        with pytest.raises(StoreUnavailable):
            fresh.claim_fresh(CONV, ["a", "b"], at=1)
    else:
        assert fresh.claim_fresh(CONV, ["a", "b"], at=1) == {"a": 7, "b": 8}
    assert step.dropped_inside == [[]]  # nothing dropped inside the step's transaction
    assert cache.dropped == [None] and cache.marks is None


@pytest.mark.parametrize("fails", [False, True], ids=["returned", "raised"])
def test_a_stored_fresh_send_drops_the_watermarks_after_the_step(
    cache: RecordingViews, fails: bool
) -> None:
    step = StoringStep(cache, fails)
    fresh = invalidating_fresh_sends(step, cache)
    assert isinstance(fresh, StoringFreshSends)
    cache.marks = Watermarks(6, 0, 0)
    if fails:
        with pytest.raises(StoreUnavailable):
            fresh.store_fresh(CONV, [message(7)], 1, stored)
    else:
        assert fresh.store_fresh(CONV, [message(7)], 1, stored) == 7
    assert step.dropped_inside == [[], []]  # not before the insert, nor after it
    assert cache.dropped == [None] and cache.marks is None


class Marks:
    """A fused mark-read that changes what it was told to (raises after writing when told)."""

    def __init__(self, changed: int, fails: bool = False) -> None:
        self.changed = changed
        self.fails = fails

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        if self.fails:
            raise StoreUnavailable("connection lost")
        return self.changed


@pytest.mark.parametrize(
    ("marks", "invalidated"),
    [(Marks(2), [3, 4]), (Marks(0), None), (Marks(0, fails=True), [3, 4])],
    ids=["changed", "unchanged", "raised"],
)
def test_a_fused_mark_read_invalidates_the_seqs_it_may_have_changed(
    cache: RecordingViews, marks: Marks, invalidated: list[int] | None
) -> None:
    cached = InvalidatingReadMarks(marks, cache)
    cache.marks = Watermarks(6, 0, 0)
    try:
        cached.mark_read(CONV, [3, 4, 3], "bob", None)
    except StoreUnavailable:
        assert marks.fails
    expected = [] if invalidated is None else [("invalidate", invalidated)]
    assert cache.calls == expected
    assert cache.dropped == []  # the read seq is not a cached watermark
