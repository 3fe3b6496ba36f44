"""The read-populate / invalidate race, forced deterministically with a held store read.

A reader misses the cache and loads the old slot; the mutation then runs completely (store
write and invalidation); only then does the reader try to cache what it loaded. The fill
guard must refuse it. The same interleaving on a cache without the guard caches the stale
slot, which shows the test really produces the race.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace

import pytest

from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.app import MessageService
from imbucket.domain.model import Slot
from imbucket.domain.projection import Entry
from tests.cache.cases import CONV, MUTATIONS, Mutation, seed
from tests.cache.conftest import CacheFactory, Rig, SpyStore, cached_service


class UnguardedCache(RedisMessageCache):
    """Fills with a ticket taken at fill time, i.e. without any read/invalidate guard."""

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        fresh = self.get_many(conversation_id, list(slots), viewer).ticket
        super().put_many(conversation_id, slots, fresh, viewer)


def read_across(service: MessageService, spy: SpyStore, mutation: Mutation) -> Entry:
    """Bob pulls mutation.seq; his store read is held while the whole mutation runs."""
    seen: list[Entry] = []
    reader = threading.Thread(target=lambda: seen.extend(service.pull(CONV, "bob", [mutation.seq])))
    spy.hold_next_read_of(reader)
    reader.start()
    assert spy.loaded.wait(10), "the reader never reached the store"
    mutation.apply(service)
    spy.resume.set()
    reader.join(10)
    assert not reader.is_alive()
    return seen[0]


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_a_read_that_loaded_the_old_slot_cannot_cache_it_after_the_mutation(
    mutation: Mutation, rig: Rig
) -> None:
    seed(rig.service)
    assert not mutation.shows(read_across(rig.service, rig.spy, mutation))  # read before...
    assert rig.cached(CONV, mutation.seq) is None  # ... and not cached after the write
    assert mutation.shows(rig.service.pull(CONV, "bob", [mutation.seq])[0])


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_without_the_guard_the_same_interleaving_caches_the_stale_slot(
    mutation: Mutation, spy: SpyStore, make_cache: CacheFactory, prefix: str
) -> None:
    unguarded = UnguardedCache(make_cache().client, key_prefix=prefix)
    service = cached_service(spy, unguarded)
    seed(service)
    read_across(service, spy, mutation)
    assert not mutation.shows(service.pull(CONV, "bob", [mutation.seq])[0])  # stale


@pytest.mark.parametrize("seen", ["a generation", "no generation"])
def test_a_generation_key_lost_during_the_read_lets_no_old_slot_in(seen: str, rig: Rig) -> None:
    revoke = next(m for m in MUTATIONS if m.name == "revoke")
    generation = rig.cache.generation_key(CONV)
    seed(rig.service)
    if seen == "no generation":
        rig.raw.delete(generation)

    def revoke_then_lose_the_generation(service: MessageService) -> None:
        revoke.apply(service)
        rig.raw.delete(generation)  # evicted, or Redis restarted without persistence

    read_across(rig.service, rig.spy, replace(revoke, apply=revoke_then_lose_the_generation))
    assert rig.cached(CONV, revoke.seq) is None
    assert rig.raw.exists(generation)  # the refused fill started a new generation...
    assert revoke.shows(rig.service.pull(CONV, "bob", [revoke.seq])[0])
    assert rig.cached(CONV, revoke.seq) is not None  # ...so the next read fills
