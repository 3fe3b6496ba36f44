"""Fixtures for the Redis cache tests: a counting client, a counting store, a service on both."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.cached_store import CachedMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.adapters.redis_client import client_options, make_client
from imbucket.app import MessageService
from imbucket.app.backends import Backend, cached
from imbucket.domain.model import InsertResult, Message, Revoke, Slot, StoreStats
from imbucket.domain.tags import Guard
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore
from tests.redis_server import redis_prefix, redis_url


class CountingRedis(redis.Redis):
    """A Redis client that records the name of every command it sends (or tries to)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        """A pipeline whose execute counts as one command, PIPELINE."""
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.commands.append("PIPELINE")
            return execute(*args, **kwargs)

        pipe.execute = counted  # type: ignore[method-assign]
        return pipe


class CountingRedisCluster(RedisCluster):
    """A cluster client that records the name of every command it sends (or tries to)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.commands: list[str] = []  # the constructor already sends commands
        super().__init__(*args, **kwargs)
        self.commands.clear()

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **kwargs)


class SpyStore:
    """A MessageStore wrapper counting data reads; can hold one get until told to go on."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.layout = store.layout
        self.reads: list[list[int]] = []
        self._hold: threading.Thread | None = None
        self.loaded = threading.Event()
        self.resume = threading.Event()

    def hold_next_read_of(self, thread: threading.Thread) -> None:
        """Make thread's next get pause after reading the store, until resume is set."""
        self._hold = thread

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        self.reads.append(list(seqs))
        slots = self.store.get(conversation_id, seqs, viewer)
        if self._hold is threading.current_thread():
            self._hold = None
            self.loaded.set()
            assert self.resume.wait(10), "the test never resumed the held read"
        return slots

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        return self.store.insert(conversation_id, messages)

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        return self.store.revoke(conversation_id, seq, revoke)

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        return self.store.delete_for(conversation_id, seqs, user_id, guard)

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        return self.store.mark_read(conversation_id, seqs, reader_id, guard)

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        return self.store.purge(conversation_id, seqs, guard)

    def stats(self) -> StoreStats:
        return self.store.stats()

    def close(self) -> None:
        self.store.close()


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Target:
    """The Redis the cache tests run on: the shared server, or this run's own cluster."""

    url: str
    cluster: bool

    @property
    def lookup(self) -> str:
        """The one command of a cache lookup: MGET, or on a cluster the read script."""
        return "EVALSHA" if self.cluster else "MGET"


@pytest.fixture
def url() -> str:
    return redis_url()


@pytest.fixture(params=["redis", "redis-cluster"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each cache test runs on a single Redis and on a Redis Cluster."""
    if request.param == "redis":
        return Target(redis_url(), cluster=False)
    return Target(request.getfixturevalue("redis_cluster").url, cluster=True)


@pytest.fixture
def prefix(target: Target) -> Iterator[str]:
    with redis_prefix(target.url, target.cluster) as prefix:
        yield prefix


@pytest.fixture
def raw(target: Target) -> Iterator[redis.Redis]:
    """A plain client for looking at what the cache left in Redis."""
    client: Any = make_client(target.url, cluster=target.cluster)
    yield client
    client.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


CacheFactory = Callable[..., RedisMessageCache]


@pytest.fixture
def make_cache(target: Target, prefix: str, clock: Clock) -> Iterator[CacheFactory]:
    """Build caches under this test's prefix on a counting client (closed afterwards)."""
    made: list[RedisMessageCache] = []

    def make(
        cache_url: str | None = None, timeout: float = 0.25, **options: Any
    ) -> RedisMessageCache:
        counting = CountingRedisCluster if target.cluster else CountingRedis
        client = counting.from_url(cache_url or target.url, **client_options(timeout))
        options.setdefault("key_prefix", prefix)
        options.setdefault("clock", clock)
        cache = RedisMessageCache(client, **options)
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def commands(cache: RedisMessageCache) -> list[str]:
    """The commands the cache's CountingRedis sent so far."""
    client = cache.client
    assert isinstance(client, CountingRedis | CountingRedisCluster)
    return client.commands


@pytest.fixture
def spy() -> SpyStore:
    """A memory store whose reads are counted."""
    return SpyStore(BucketMessageStore(MemoryBucketRepository()))


NOW_MS = 1_800_000_000_000


def plain_service(store: MessageStore) -> MessageService:
    """A service on store with in-memory seqs and a fixed server time."""
    return MessageService(store, MemorySeqStore(), clock=lambda: NOW_MS)


def cached_service(store: MessageStore, cache: RedisMessageCache) -> MessageService:
    """plain_service behind cache."""
    return plain_service(CachedMessageStore(store, cache))


def viewed_service(
    store: MessageStore, cache: RedisMessageCache, seqs: SeqStore | None = None
) -> MessageService:
    """A service wired as the container wires a cache: writes, seqs and pulls through it."""
    backend = cached(Backend(store, seqs or MemorySeqStore()), cache)
    return MessageService(backend.store, backend.seqs, views=backend.views, clock=lambda: NOW_MS)


@pytest.fixture
def cache(make_cache: CacheFactory) -> RedisMessageCache:
    return make_cache()


@pytest.fixture
def service(spy: SpyStore, cache: RedisMessageCache) -> MessageService:
    return cached_service(spy, cache)


@dataclass(frozen=True)
class Rig:
    """A cached service, its spied store, its cache and a raw look into Redis."""

    service: MessageService
    spy: SpyStore
    cache: RedisMessageCache
    raw: redis.Redis
    target: Target

    def cached(self, conversation_id: str, seq: int) -> Any:
        """The raw cache value of seq, if any."""
        return self.raw.get(self.cache.slot_key(conversation_id, seq))


@pytest.fixture
def rig(
    service: MessageService,
    spy: SpyStore,
    cache: RedisMessageCache,
    raw: redis.Redis,
    target: Target,
) -> Rig:
    return Rig(service, spy, cache, raw, target)
