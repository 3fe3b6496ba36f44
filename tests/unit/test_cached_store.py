"""CachedMessageStore's decisions, on a recording MessageCache (a port stub, not an engine)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.cached_store import CachedMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app.service import MessageService
from imbucket.domain.errors import NotPermitted, StoreUnavailable
from imbucket.domain.model import Actor, InsertResult, Message, Revoke, Role, Slot
from imbucket.domain.tags import Guard
from imbucket.ports.message_cache import CacheRead, MessageCache
from imbucket.testing.factories import CONV, messages


class RecordingCache:
    """Keeps slots in a dict and logs every call; get_many hands out ``ticket`` (None = down)."""

    def __init__(self) -> None:
        self.slots: dict[int, Slot] = {}
        self.calls: list[tuple[str, list[int]]] = []
        self.ticket: object | None = "ticket"

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        self.calls.append(("get", list(seqs)))
        return CacheRead({s: self.slots[s] for s in seqs if s in self.slots}, self.ticket)

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        assert ticket == self.ticket
        self.calls.append(("put", list(slots)))
        self.slots.update(slots)

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> bool:
        self.calls.append(("invalidate", list(seqs)))
        for seq in seqs:
            self.slots.pop(seq, None)
        return True

    def close(self) -> None:
        self.calls.append(("close", []))


class BrokenStore(BucketMessageStore):
    """Writes land, then the driver fails (e.g. the connection dropped before the reply)."""

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        super().insert(conversation_id, messages)
        raise StoreUnavailable("connection lost")

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        super().purge(conversation_id, seqs, guard)
        raise StoreUnavailable("connection lost")


@pytest.fixture
def cache() -> RecordingCache:
    return RecordingCache()


def cached(cache: RecordingCache, store: BucketMessageStore | None = None) -> CachedMessageStore:
    return CachedMessageStore(store or BucketMessageStore(MemoryBucketRepository()), cache)


def test_the_stub_is_a_message_cache(cache: RecordingCache) -> None:
    assert isinstance(cache, MessageCache)


def test_get_reads_the_store_once_for_all_misses_and_fills_only_stored_slots(
    cache: RecordingCache,
) -> None:
    store = cached(cache)
    store.insert(CONV, messages(1, 3))
    cache.calls.clear()
    slots = store.get(CONV, [3, 1, 3, 9])
    assert sorted(slots) == [1, 3]
    assert cache.calls == [("get", [3, 1, 9]), ("put", [3, 1])]  # 9 has nothing: not cached
    cache.calls.clear()
    assert store.get(CONV, [1, 3]) == slots
    assert cache.calls == [("get", [1, 3])]


def test_without_a_ticket_nothing_is_filled(cache: RecordingCache) -> None:
    cache.ticket = None
    store = cached(cache)
    store.insert(CONV, messages(1, 2))
    cache.calls.clear()
    assert sorted(store.get(CONV, [1, 2])) == [1, 2]
    assert cache.calls == [("get", [1, 2])]


def test_writes_invalidate_what_they_changed_and_no_ops_nothing(cache: RecordingCache) -> None:
    store = cached(cache)
    store.insert(CONV, messages(1, 3))
    store.insert(CONV, messages(2, 4))  # 2, 3 duplicates
    assert store.revoke(CONV, 1, Revoke("alice", Role.MEMBER, "", 1)) is True
    assert store.revoke(CONV, 1, Revoke("alice", Role.MEMBER, "", 2)) is False
    assert store.delete_for(CONV, [2, 2], "bob") == 1
    assert store.delete_for(CONV, [2], "bob") == 0
    assert store.mark_read(CONV, [3], "bob") == 1
    assert store.purge(CONV, [4]) == 1
    assert store.purge(CONV, [4]) == 0
    assert [c for c in cache.calls if c[0] == "invalidate"] == [
        ("invalidate", [1, 2, 3]),
        ("invalidate", [4]),
        ("invalidate", [1]),
        ("invalidate", [2]),
        ("invalidate", [3]),
        ("invalidate", [4]),
    ]


def test_a_write_that_failed_half_way_is_invalidated_anyway(cache: RecordingCache) -> None:
    store = cached(cache, BrokenStore(MemoryBucketRepository()))
    with pytest.raises(StoreUnavailable):
        store.insert(CONV, messages(1, 2))
    with pytest.raises(StoreUnavailable):
        store.purge(CONV, [1])
    assert cache.calls == [("invalidate", [1, 2]), ("invalidate", [1])]


def test_close_closes_cache_and_store(cache: RecordingCache) -> None:
    store = cached(cache)
    store.close()
    assert cache.calls == [("close", [])]


def test_a_revoke_refused_for_a_message_the_cache_lags_behind_asks_the_store(
    cache: RecordingCache,
) -> None:
    store = BucketMessageStore(MemoryBucketRepository())
    seqs = MemorySeqStore()
    store.insert(CONV, messages(1, 1, send_id="alice"))
    seqs.raise_max_seq(CONV, 1)
    cache.slots[1] = Slot(deleted_by=frozenset({"bob"}))  # cached before the message landed
    lagging = MessageService(cached(cache, store), seqs)
    with pytest.raises(NotPermitted, match="not stored yet"):
        lagging.revoke(CONV, 1, Actor("alice"))
    service = MessageService(cached(cache, store), seqs, authority=store)
    assert service.revoke(CONV, 1, Actor("alice")) is True
    assert store.get(CONV, [1])[1].revoke is not None
    assert service.revoke(CONV, 1, Actor("alice")) is False  # once, as without a cache
