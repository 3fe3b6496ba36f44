"""Pulls through the cached views: one Redis round trip when cached, never a stale watermark.

The service is wired as the container wires a cache (``app.backends.cached``): the store reads
through the cache, the seq store drops cached watermarks after its writes, pulls ask the cache
for the watermarks and the slots in one script.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pytest
import redis

from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.adapters.timeouts import Timeouts
from imbucket.app import MessageService, backends
from imbucket.bench.instrument.roundtrips import RoundTrips, watch
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Draft, Pick, SessionType, Slot, Watermarks
from imbucket.domain.projection import Entry, MessageView
from tests.cache.cases import CONV, OWNER, chat, seed
from tests.cache.conftest import (
    NOW_MS,
    CacheFactory,
    Rig,
    SpyStore,
    Target,
    commands,
    viewed_service,
)


@dataclass(frozen=True)
class Kind:
    """A kind of pull, as bob makes it in the seeded chat (seqs 1..6; 7 not allocated)."""

    name: str
    run: Callable[[MessageService], list[Entry]]


KINDS = [
    Kind("pull", lambda s: s.pull(CONV, "bob", [2, 4, 6, 7])),
    Kind("pull_range", lambda s: s.pull_range(CONV, "bob", 1, 7)),
    Kind("pull_latest", lambda s: s.pull_latest(CONV, "bob", 20)),
]


def message_7(entries: list[Entry]) -> bool:
    return any(isinstance(e, MessageView) and e.seq == 7 for e in entries)


def cleared(entries: list[Entry]) -> bool:
    return not any(isinstance(e, MessageView) for e in entries)


@dataclass(frozen=True)
class Change:
    """A write that moves bob's watermarks, and how his next pull shows it."""

    name: str
    apply: Callable[[MessageService], object]
    shows: Callable[[list[Entry]], bool]


def send_7(service: MessageService) -> object:
    draft = Draft("alice", "message 7", "c7", session_type=SessionType.SINGLE, recv_id="bob")
    return service.send(CONV, [draft])


CHANGES = [
    Change("clear_history", lambda s: s.clear_history(CONV, "bob"), cleared),
    Change("clear_for_everyone", lambda s: s.clear_for_everyone(CONV, OWNER), cleared),
    Change("send", send_7, message_7),  # allocate
    Change("ingest", lambda s: s.ingest(CONV, chat(7, 7)), message_7),  # raise_max_seq
]


@pytest.fixture
def viewed(spy: SpyStore, cache: RedisMessageCache, raw: redis.Redis, target: Target) -> Rig:
    """A service on the spied memory store, wired through the cache like the container."""
    return Rig(viewed_service(spy, cache), spy, cache, raw, target)


def warm(rig: Rig, kind: Kind) -> list[Entry]:
    """Seed, pull until cached, and check the next pull of kind reads no store."""
    seed(rig.service)
    entries = kind.run(rig.service)
    rig.spy.reads.clear()
    assert kind.run(rig.service) == entries
    assert rig.spy.reads == []
    return entries


@pytest.fixture
def sql_service(cache: RedisMessageCache) -> Iterator[MessageService]:
    """sql-bucket on SQLite behind the cache: a store whose round trips the drivers count."""
    layout = BucketLayout()
    store = backends.sql_bucket("sqlite://", layout, TagBudget.default(layout.size), Timeouts())
    # The store's invalidation log is read once an hour here: these pins count the cache's
    # own round trips (tests/cache/test_partition.py pins the log's).
    wired = backends.cached(store, cache, staleness_seconds=3600)
    yield MessageService(wired.store, wired.seqs, views=wired.views, clock=lambda: NOW_MS)
    store.store.close()
    store.seqs.close()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_a_fully_cached_pull_is_one_redis_round_trip_and_no_store_round_trip(
    kind: Kind, sql_service: MessageService, cache: RedisMessageCache
) -> None:
    seed(sql_service)
    first = kind.run(sql_service)
    assert kind.run(sql_service) == first
    commands(cache).clear()
    with watch(RoundTrips()) as trips:
        entries = kind.run(sql_service)
    assert entries == first
    assert commands(cache) == ["EVALSHA"]
    assert trips.snapshot().without("redis").total == 0


def test_cached_watermarks_and_a_missed_slot_cost_one_store_read(
    sql_service: MessageService, cache: RedisMessageCache
) -> None:
    seed(sql_service)
    sql_service.pull_latest(CONV, "bob")
    sql_service.mark_read(CONV, [3], "bob")  # drops slot 3, not the watermarks
    commands(cache).clear()
    with watch(RoundTrips()) as trips:
        entries = sql_service.pull_latest(CONV, "bob")
    assert entries[2].is_read is True  # type: ignore[union-attr]
    assert commands(cache) == ["EVALSHA", "EVALSHA"]  # the lookup, the fill of slot 3
    assert trips.snapshot().without("redis").drivers == {"sql": 1}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.name)
def test_a_watermark_change_after_a_cached_pull_shows_on_the_next_pull(
    change: Change, kind: Kind, viewed: Rig
) -> None:
    before = warm(viewed, kind)
    assert not change.shows(before)
    change.apply(viewed.service)
    after = kind.run(viewed.service)
    assert change.shows(after)
    viewed.spy.reads.clear()
    assert kind.run(viewed.service) == after  # cached again
    assert viewed.spy.reads == []


def test_a_no_op_raise_keeps_the_cached_watermarks(viewed: Rig) -> None:
    warm(viewed, KINDS[2])
    marks = viewed.raw.get(viewed.cache.marks_key(CONV))
    viewed.service.ingest(CONV, chat(1, 5))  # redelivery: max_seq is 6 already
    assert viewed.raw.get(viewed.cache.marks_key(CONV)) == marks is not None


class UnguardedCache(RedisMessageCache):
    """Fills views with a ticket taken at fill time, i.e. without any read/invalidate guard."""

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        fresh = self.get_view(conversation_id, viewer, Pick(seqs=())).ticket
        super().put_view(conversation_id, viewer, marks, slots, fresh)


def read_across(service: MessageService, spy: SpyStore, change: Change) -> list[Entry]:
    """Bob pulls seqs 3 and 7 on uncached watermarks; his read is held while change runs.

    The reader reads the watermarks, then the slots, and pauses before its fill.
    """
    seen: list[Entry] = []
    reader = threading.Thread(target=lambda: seen.extend(service.pull(CONV, "bob", [3, 7])))
    spy.hold_next_read_of(reader)
    reader.start()
    assert spy.loaded.wait(10), "the reader never reached the store"
    change.apply(service)
    spy.resume.set()
    reader.join(10)
    assert not reader.is_alive()
    return seen


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.name)
def test_a_read_of_old_watermarks_cannot_cache_them_after_the_change(
    change: Change, viewed: Rig
) -> None:
    seed(viewed.service)  # raise_max_seq: no watermarks cached
    assert not change.shows(read_across(viewed.service, viewed.spy, change))  # read before...
    assert viewed.raw.get(viewed.cache.marks_key(CONV)) is None  # ...not cached after
    assert change.shows(viewed.service.pull(CONV, "bob", [3, 7]))
    assert change.shows(viewed.service.pull_latest(CONV, "bob"))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.name)
def test_without_the_guard_the_same_interleaving_caches_stale_watermarks(
    change: Change, spy: SpyStore, make_cache: CacheFactory, prefix: str
) -> None:
    service = viewed_service(spy, UnguardedCache(make_cache().client, key_prefix=prefix))
    seed(service)
    read_across(service, spy, change)
    assert not change.shows(service.pull(CONV, "bob", [3, 7]))  # stale


def test_seqs_beyond_exact_doubles_are_answered_right(viewed: Rig) -> None:
    top = 10**16 + 3
    viewed.service.ingest(CONV, chat(top - 2, top))
    for _ in range(3):
        assert [e.seq for e in viewed.service.pull_latest(CONV, "bob", 2)] == [top - 1, top]
        entries = viewed.service.pull(CONV, "bob", [top - 2, top + 1])
        assert [type(e).__name__ for e in entries] == ["MessageView", "Tombstone"]
    viewed.spy.reads.clear()
    viewed.service.pull(CONV, "bob", [top - 2])
    assert viewed.spy.reads == []  # listed seqs keep their own text: still cached


@pytest.mark.parametrize("target", ["redis-cluster"], indirect=True)
def test_watermarks_written_before_a_failover_are_not_served(viewed: Rig) -> None:
    """A cached watermark of another master or an earlier epoch reads as a miss."""
    warm(viewed, KINDS[2])
    key = viewed.cache.marks_key(CONV)
    stamped = viewed.raw.get(key)
    assert stamped is not None and stamped.endswith(b"|6,0")
    stamp = stamped[: -len(b"6,0")]
    older = stamp.replace(b"/", b"0/", 1)  # another replication id, as after a promotion
    viewed.raw.set(key, older + b"5,0")  # a max_seq whose invalidation the promotion lost
    assert viewed.cache.get_view(CONV, "bob", Pick(latest=20)).marks is None
    assert [e.seq for e in viewed.service.pull_latest(CONV, "bob")] == [1, 2, 3, 4, 5, 6]
    assert viewed.raw.get(key) == stamped  # refilled under the current stamp
