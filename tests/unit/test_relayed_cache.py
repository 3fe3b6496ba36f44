"""RelayedCache: what a cache refuses reaches every reader through the store's log, once per
interval, and a reader serves nothing from the cache until it has caught up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from imbucket.adapters.memory import MemoryInvalidationLog
from imbucket.adapters.relayed_cache import PAGE, RelayedCache
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.invalidation import Invalidation
from imbucket.domain.model import Pick, Slot, Watermarks
from imbucket.ports.invalidation_log import LoggedInvalidation
from imbucket.ports.message_cache import CacheRead, ViewRead

CONV = "sg_team"
STALENESS = 1.0
MARKS = Watermarks(max_seq=3)


class FakeCache:
    """A ViewCache that answers every view, and takes invalidations while ``reachable``."""

    def __init__(self, reachable: bool = True) -> None:
        self.reachable = reachable
        self.dropped: list[tuple[str, object]] = []
        self.views = 0

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        return CacheRead({}, ticket="t")

    def get_view(self, conversation_id: str, viewer: str, pick: Pick) -> ViewRead:
        self.views += 1
        return ViewRead(MARKS, {}, ticket="t")

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        pass

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        pass

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> bool:
        if self.reachable:
            self.dropped.append((conversation_id, tuple(seqs)))
        return self.reachable

    def invalidate_marks(self, conversation_id: str, user_id: str | None = None) -> bool:
        if self.reachable:
            self.dropped.append((conversation_id, ("marks", user_id)))
        return self.reachable

    def close(self) -> None:
        pass


class CountingLog(MemoryInvalidationLog):
    """The memory log, counting reads and able to fail like an unreachable store."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.down = False

    def append(self, invalidation: Invalidation, written_at: float) -> None:
        if self.down:
            raise StoreUnavailable("store unreachable")
        super().append(invalidation, written_at)

    def read(self, limit: int) -> list[LoggedInvalidation]:
        if self.down:
            raise StoreUnavailable("store unreachable")
        self.reads += 1
        return super().read(limit)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def relayed(cache: FakeCache, log: CountingLog, clock: Clock) -> RelayedCache:
    return RelayedCache(
        cache, log, staleness=STALENESS, ttl_seconds=3600, monotonic=clock, wall=clock
    )


def view(cache: RelayedCache) -> ViewRead:
    return cache.get_view(CONV, "bob", Pick(latest=20))


@pytest.fixture
def log() -> CountingLog:
    return CountingLog()


def test_a_refused_invalidation_is_logged_before_invalidate_returns(log: CountingLog) -> None:
    writer = relayed(FakeCache(reachable=False), log, Clock())
    assert writer.invalidate(CONV, [7]) is False
    assert writer.invalidate_marks(CONV) is False
    assert writer.invalidate_marks(CONV, "bob") is False
    assert [entry.invalidation for entry in log.read(10)] == [
        Invalidation(CONV, seqs=(7,)),
        Invalidation(CONV, watermarks=True),
        Invalidation(CONV, floors=("bob",)),
    ]


def test_a_delivered_invalidation_is_not_logged(log: CountingLog) -> None:
    writer = relayed(FakeCache(), log, Clock())
    assert writer.invalidate(CONV, [7]) is True
    assert log.read(10) == []


def test_a_reader_replays_the_log_before_serving_and_empties_it(log: CountingLog) -> None:
    clock = Clock()
    relayed(FakeCache(reachable=False), log, clock).invalidate(CONV, [7, 8])
    cache = FakeCache()
    reader = relayed(cache, log, clock)
    assert view(reader).marks == MARKS
    assert cache.dropped == [(CONV, (7, 8))]
    assert log.read(10) == []


def test_the_log_is_read_once_per_interval_however_many_reads(log: CountingLog) -> None:
    clock = Clock()
    cache = FakeCache()
    reader = relayed(cache, log, clock)
    for _ in range(50):
        view(reader)
        clock.now += STALENESS / 100
    assert (log.reads, cache.views) == (1, 50)
    clock.now += STALENESS
    view(reader)
    assert (log.reads, cache.views) == (2, 51)


def test_a_write_logged_after_a_catch_up_is_served_by_the_next_one(log: CountingLog) -> None:
    clock = Clock()
    cache = FakeCache()
    reader = relayed(cache, log, clock)
    view(reader)
    relayed(FakeCache(reachable=False), log, clock).invalidate(CONV, [9])
    clock.now += STALENESS
    view(reader)
    assert cache.dropped == [(CONV, (9,))]


def test_an_entry_the_reader_cannot_deliver_stays_and_nothing_is_served(
    log: CountingLog,
) -> None:
    clock = Clock()
    relayed(FakeCache(reachable=False), log, clock).invalidate(CONV, [7])
    reader = relayed(FakeCache(reachable=False), log, clock)
    assert view(reader) == ViewRead()
    assert reader.get_many(CONV, [7]) == CacheRead()
    assert [entry.invalidation for entry in log.read(10)] == [Invalidation(CONV, seqs=(7,))]


def test_an_unreadable_log_means_no_cache_hits(log: CountingLog) -> None:
    reader = relayed(FakeCache(), log, Clock())
    log.down = True
    assert view(reader) == ViewRead()
    log.down = False
    assert view(reader).marks == MARKS


def test_when_neither_cache_nor_log_takes_it_the_write_is_not_acknowledged(
    log: CountingLog,
) -> None:
    clock = Clock()
    writer = relayed(FakeCache(reachable=False), log, clock)
    log.down = True
    with pytest.raises(StoreUnavailable):
        writer.invalidate(CONV, [7])
    log.down = False
    # The entry is kept and logged by the writer's next cache call that reaches the store.
    writer.get_many(CONV, [1])
    assert [entry.invalidation for entry in log.read(10)] == [Invalidation(CONV, seqs=(7,))]


def test_entries_older_than_the_ttl_are_dropped_undelivered(log: CountingLog) -> None:
    clock = Clock()
    relayed(FakeCache(reachable=False), log, clock).invalidate(CONV, [7])
    clock.now += 3600 + 3600
    cache = FakeCache()
    view(relayed(cache, log, clock))
    assert cache.dropped == []
    assert log.read(10) == []


def test_a_long_log_is_merged_per_conversation_and_read_in_pages(log: CountingLog) -> None:
    clock = Clock()
    writer = relayed(FakeCache(reachable=False), log, clock)
    for seq in range(1, PAGE + 6):
        writer.invalidate(CONV if seq % 2 else "sg_other", [seq])
    cache = FakeCache()
    view(relayed(cache, log, clock))
    assert log.read(10) == []
    assert log.reads == 2 + 1  # two pages here, plus the check above
    assert len(cache.dropped) == 4  # two conversations, once per page
    assert sorted(seq for _, seqs in cache.dropped for seq in seqs) == list(range(1, PAGE + 6))
