"""One factory per store backend. Drivers are imported inside the factories, never at import.

Each factory is registered, with its backend's rules, in ``imbucket.app.registry``; so are
third-party backends, through the entry point group ``imbucket.backends`` (docs/plugins.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.extras import missing, needs_extra
from imbucket.adapters.memory import (
    MemoryBucketRepository,
    MemoryCacheBinding,
    MemoryInvalidationLog,
    MemorySeqStore,
)
from imbucket.adapters.timeouts import (
    DEFAULT_CACHE_SECONDS,
    DEFAULT_CACHE_STALENESS_SECONDS,
    DEFAULT_CACHE_TTL_SECONDS,
    DEFAULT_CACHE_WARNING_SECONDS,
    PoolSize,
    Timeouts,
)
from imbucket.domain.budget import TagBudget
from imbucket.domain.cache_binding import NO_CACHE, check_cached, check_uncached, new_binding
from imbucket.domain.errors import ConfigError, LayoutMismatch
from imbucket.domain.layout import BucketLayout
from imbucket.ports.bucket_repository import BucketRepository
from imbucket.ports.cache_binding import CacheBindingRecord
from imbucket.ports.fresh_sends import FreshSends
from imbucket.ports.health import HealthProbe
from imbucket.ports.invalidation_log import InvalidationLog
from imbucket.ports.message_cache import ViewCache
from imbucket.ports.message_store import MessageStore
from imbucket.ports.read_marks import ReadMarks
from imbucket.ports.seq_store import SeqStore
from imbucket.ports.shared_view_reads import SharedViewReads
from imbucket.ports.view_reads import ViewReads

if TYPE_CHECKING:
    from imbucket.adapters.mongo.connection import MongoConnection
    from imbucket.adapters.mongo.mark_read_writes import RidingWrites
    from imbucket.adapters.mongo.read_marks import MarkingStore
    from imbucket.adapters.redis_cache import RedisMessageCache
    from imbucket.adapters.sql.bucket import SqlBucketStore
    from imbucket.adapters.sql.row import SqlRowStore
    from imbucket.adapters.sql.seq import SqlSeqStore


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Backend:
    """A store, the seq store that shares its connection, and how to name the server's version."""

    store: MessageStore
    seqs: SeqStore
    version: Callable[[], str] | None = None
    # The pull's reads in one round trip, when the store and seq store share an engine.
    views: ViewReads | None = None
    # Mark-read's tags and read seq together: SQL raises the read seq in the tag write's
    # read; MongoDB reads max_seq and the read seq with the slots (docs/mongo.md).
    read_marks: ReadMarks | None = None
    # Which cache fronts the store (imbucket.domain.cache_binding); a backend without one cannot be
    # put behind a cache.
    binding: CacheBindingRecord | None = None
    # Where writers record the cache invalidations they could not deliver, for every reader
    # to replay (adapters.relayed_cache); without one a cut-off writer's changes may be
    # served stale from the cache until the entries' TTL ends.
    invalidation_log: InvalidationLog | None = None
    # The cache in front of the store, asked by the service's health call (None: uncached).
    cache_probe: HealthProbe | None = None
    # A send of new client_msg_ids claimed and allocated in one step (None: the general path).
    fresh_sends: FreshSends | None = None
    # One read answering many viewers' pulls of a conversation (coalesced pulls).
    shared_views: SharedViewReads | None = None


def memory(url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts) -> Backend:
    """Buckets and counters in this process's memory."""
    return memory_over(MemoryBucketRepository(layout), MemorySeqStore(), budget)


def memory_over(repository: BucketRepository, seqs: SeqStore, budget: TagBudget) -> Backend:
    """The memory backend over its two engines (the bench passes them wrapped, to count)."""
    return Backend(
        BucketMessageStore(repository, budget),
        seqs,
        binding=MemoryCacheBinding(),
        invalidation_log=MemoryInvalidationLog(),
    )


def sql_row(
    url: str,
    layout: BucketLayout,
    budget: TagBudget,
    timeouts: Timeouts,
    pool: PoolSize | None = None,
    *,
    asynchronous: bool = False,
) -> Backend:
    """One row per message on SQLite, PostgreSQL or MariaDB (``sqlite://`` when url is empty).

    Rows have no buckets to bound: budget is not used. The store reads a pull's watermarks
    and slots in one statement (its ``view``). pool: connections kept on a server;
    asynchronous: on the engine's asyncio driver (``imbucket.aio``).
    """
    with needs_extra("store backend 'sql-row'"):
        from imbucket.adapters.sql import open_row

    store, seqs = open_row(url, layout, timeouts, pool, asynchronous=asynchronous)
    return _sql(store, seqs)


def sql_bucket(
    url: str,
    layout: BucketLayout,
    budget: TagBudget,
    timeouts: Timeouts,
    pool: PoolSize | None = None,
    *,
    asynchronous: bool = False,
) -> Backend:
    """JSON buckets on SQLite, PostgreSQL or MariaDB (``sqlite://`` when url is empty).

    The store reads a pull's watermarks and slots in one statement (its ``view``). pool:
    connections kept on a server; asynchronous: on the engine's asyncio driver (``imbucket.aio``).
    """
    with needs_extra("store backend 'sql-bucket'"):
        from imbucket.adapters.sql import open_bucket

    store, seqs = open_bucket(url, layout, budget, timeouts, pool, asynchronous=asynchronous)
    return _sql(store, seqs)


def _sql(store: SqlRowStore | SqlBucketStore, seqs: SqlSeqStore) -> Backend:
    """A SQL store and its seq store on one engine, with fused reads and mark-reads."""
    from imbucket.adapters.sql.binding import SqlCacheBinding
    from imbucket.adapters.sql.invalidation_log import SqlInvalidationLog
    from imbucket.adapters.sql.read_marks import SqlReadMarks
    from imbucket.adapters.sql.send import SqlFreshSends

    binding = SqlCacheBinding(seqs.db, seqs.schema.cache_binding)
    log_of_store = SqlInvalidationLog(seqs.db, seqs.schema.cache_log)
    marks = SqlReadMarks(store, seqs)
    # The messages ride in the step's statement where the engine has one (PostgreSQL).
    fresh = SqlFreshSends(seqs.db, store.schema, store)
    version = seqs.db.server_version
    return Backend(
        store,
        seqs,
        version,
        store,
        marks,
        binding,
        log_of_store,
        fresh_sends=fresh,
        shared_views=_shared_views(store),
    )


def _shared_views(store: SqlRowStore | SqlBucketStore) -> SharedViewReads:
    """The herd reads of a SQL store (one statement for many viewers' pulls)."""
    from imbucket.adapters.sql.bucket import SqlBucketStore
    from imbucket.adapters.sql.bucket_pulls import SqlBucketPulls
    from imbucket.adapters.sql.row_pulls import SqlRowPulls

    if isinstance(store, SqlBucketStore):
        return SqlBucketPulls(store)
    return SqlRowPulls(store)


def mongo_bucket(
    url: str,
    layout: BucketLayout,
    budget: TagBudget,
    timeouts: Timeouts,
    *,
    asynchronous: bool = False,
) -> Backend:
    """OpenIM's bucket collection ``msg`` under the shared bucket state machine.

    asynchronous: on PyMongo's asyncio client (``imbucket.aio``).
    """
    with needs_extra("store backend 'mongo-bucket'"):
        from imbucket.adapters.mongo.bucket import MongoBucketRepository, MongoBucketStore
        from imbucket.adapters.mongo.commands import BUCKETS
        from imbucket.adapters.mongo.views import MongoBucketViews

    def make(connection: MongoConnection) -> tuple[MarkingStore, ViewReads, RidingWrites]:
        store = MongoBucketStore(MongoBucketRepository(connection, layout), budget)
        return store, MongoBucketViews(connection, store), store.repository.riding

    return _mongo(url, timeouts, make, BUCKETS, asynchronous)


def mongo_row(
    url: str,
    layout: BucketLayout,
    budget: TagBudget,
    timeouts: Timeouts,
    *,
    asynchronous: bool = False,
) -> Backend:
    """One MongoDB document per message (collection ``msg_row``); budget is not used.

    asynchronous: on PyMongo's asyncio client (``imbucket.aio``).
    """
    with needs_extra("store backend 'mongo-row'"):
        from imbucket.adapters.mongo.commands import ROWS
        from imbucket.adapters.mongo.row import MongoRowRepository, MongoRowStore
        from imbucket.adapters.mongo.views import MongoRowViews

    def make(connection: MongoConnection) -> tuple[MarkingStore, ViewReads, RidingWrites]:
        store = MongoRowStore(MongoRowRepository(connection, layout))
        return store, MongoRowViews(connection), store.repository.riding

    return _mongo(url, timeouts, make, ROWS, asynchronous)


def _mongo(
    url: str,
    timeouts: Timeouts,
    make: Callable[[MongoConnection], tuple[MarkingStore, ViewReads, RidingWrites]],
    collection: str,
    asynchronous: bool,
) -> Backend:
    """Store, seq store, fused pull reads and mark-reads on one client (closed on failure).

    collection: the data collection, which also keeps the user documents (``UserDocs``) and
    the send claims (``ClaimDocs``); make returns the store, its pull reads and the riding
    writes of that collection.
    """
    with needs_extra("a MongoDB store backend"):
        from imbucket.adapters.mongo.commands import UserDocs
        from imbucket.adapters.mongo.connection import MongoConnection
        from imbucket.adapters.mongo.invalidation_log import MongoInvalidationLog
        from imbucket.adapters.mongo.read_marks import MongoReadMarks
        from imbucket.adapters.mongo.send import MongoFreshSends
        from imbucket.adapters.mongo.seq import MongoSeqStore

    connection = MongoConnection(url, timeouts=timeouts, asynchronous=asynchronous)
    try:
        store, views, riding = make(connection)
        seqs = MongoSeqStore(connection, UserDocs(collection))
        marks = MongoReadMarks(store)
        binding = connection.cache_binding(collection)
        log_of_store = MongoInvalidationLog(connection, collection)
        version = connection.server_version
        # A fresh send: no lookup before its claims, their seqs recorded by the messages' write.
        fresh = MongoFreshSends(seqs, riding)
        return Backend(store, seqs, version, views, marks, binding, log_of_store, fresh_sends=fresh)
    except BaseException:
        connection.close()
        raise


def openim_mongo(url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts) -> Backend:
    """A database OpenIM wrote, opened as it is (docs/openim.md).

    url is the MongoDB URL; an ``openim_redis`` query parameter, when present, is OpenIM's
    Redis URL, whose ``MALLOC_SEQ`` hashes give each conversation's allocated maximum.
    ``openim_writes=true`` (with ``openim_redis``) writes as OpenIM does; else read-only.
    """
    with needs_extra("store backend 'openim-mongo'"):
        from imbucket.adapters.mongo.connection import MongoConnection
        from imbucket.adapters.mongo.openim import (
            OPENIM_LAYOUT,
            OpenimBucketRepository,
            OpenimSeqStore,
            ensure_indexes,
            split_url,
        )
        from imbucket.adapters.mongo.openim_writes import OpenimAllocator
    if layout.size != OPENIM_LAYOUT.size:
        # OpenIM's doc_ids bake its size in: every database it wrote has this layout.
        raise LayoutMismatch(
            f"OpenIM's buckets hold {OPENIM_LAYOUT.size} messages, not {layout.size}: "
            "leave store.bucket_size unset"
        )
    parts = split_url(url)
    connection = MongoConnection(parts.mongo, timeouts=timeouts)
    try:
        redis = None
        if parts.redis:
            from redis import Redis

            redis = Redis.from_url(parts.redis, decode_responses=True)
        seqs = OpenimSeqStore(connection, redis, parts.writes)
        side = None
        if parts.writes and redis is not None:
            ensure_indexes(connection)
            side = OpenimAllocator(redis, connection.collection("seq"))
        store = BucketMessageStore(OpenimBucketRepository(connection, side), budget)
        return Backend(store, seqs, connection.server_version)
    except BaseException:
        connection.close()
        raise


# A backend's factory: store.url, the bucket layout, the tag budget and the timeouts. The
# registry (imbucket.app.registry) names every factory a configuration may select.
StoreFactory = Callable[[str, BucketLayout, TagBudget, Timeouts], Backend]


def store_of(backend: Backend) -> MessageStore:
    """The backend's MessageStore, uncached."""
    return backend.store


def seqs_of(backend: Backend) -> SeqStore:
    """The backend's SeqStore."""
    return backend.seqs


def views_of(backend: Backend) -> ViewReads | None:
    """The backend's fused pull reads, if it has them (else the service reads separately)."""
    return backend.views


def shared_views_of(backend: Backend) -> SharedViewReads | None:
    """The backend's reads for many viewers at once, if it has them (coalesced pulls)."""
    return backend.shared_views


def read_marks_of(backend: Backend) -> ReadMarks | None:
    """The backend's fused mark-read, if it has one (else the service raises separately)."""
    return backend.read_marks


def fresh_sends_of(backend: Backend) -> FreshSends | None:
    """The backend's one-step claim of a fresh send, if it has one (else the general path)."""
    return backend.fresh_sends


def cache_probe_of(backend: Backend) -> HealthProbe | None:
    """The cache's health probe, when a cache fronts the backend."""
    return backend.cache_probe


def version_of(backend: Backend) -> str:
    """The server's version ("MongoDB 7.0.12"), or "" when the backend does not say."""
    return backend.version() if backend.version is not None else ""


def redis_cached(
    backend: Backend,
    url: str,
    ttl_seconds: int,
    key_prefix: str,
    connect_timeout: float = DEFAULT_CACHE_SECONDS,
    socket_timeout: float = DEFAULT_CACHE_SECONDS,
    cluster: bool = False,
    staleness_seconds: float = DEFAULT_CACHE_STALENESS_SECONDS,
    warning_interval_seconds: float = DEFAULT_CACHE_WARNING_SECONDS,
    asynchronous: bool = False,
) -> Backend:
    """The backend behind the Redis read cache (see ``cached``).

    A single Redis is connected lazily, on first use. A cluster client (``cluster``) asks the
    node named by url for the topology now; ConfigError if no node answers.
    staleness_seconds bounds how long a write whose writer could not reach Redis may be
    served stale by other processes (``adapters.relayed_cache``). asynchronous: on
    redis.asyncio (``imbucket.aio``).
    """
    name = "redis-cluster" if cluster else "redis"
    try:
        from imbucket.adapters.redis_cache import RedisMessageCache
        from imbucket.adapters.redis_client import REDIS_ERRORS
    except ImportError as error:
        raise missing(error, f"cache backend {name!r}") from None
    try:
        cache = RedisMessageCache.from_url(
            url,
            cluster=cluster,
            socket_timeout=socket_timeout,
            connect_timeout=connect_timeout,
            ttl_seconds=ttl_seconds,
            key_prefix=key_prefix,
            warning_interval=warning_interval_seconds,
            asynchronous=asynchronous,
        )
    except ValueError as error:
        raise ConfigError(f"invalid cache url {url!r}: {error}") from None
    except REDIS_ERRORS as error:
        raise ConfigError(
            f"cache backend {name!r}: no cluster node answers at {url!r}: {error}"
        ) from None
    try:
        bind_cache(backend, cache, f"{url} under prefix {key_prefix!r}")
    except BaseException:
        cache.close()
        raise
    if backend.invalidation_log is None:
        log.warning(
            "this store backend keeps no cache invalidation log (Backend.invalidation_log, "
            "docs/plugins.md): a writer cut off from the cache may leave what it changed "
            "served stale by other processes until the entries' TTL ends"
        )
    return cached(backend, cache, staleness_seconds, ttl_seconds, probe=cache)


def uncached(backend: Backend) -> Backend:
    """The backend, once its store is found bound to no cache (else CacheMismatch).

    A new store records that it has none.
    """
    if backend.binding is not None:
        check_uncached(backend.binding.record(NO_CACHE))
    return backend


def bind_cache(backend: Backend, cache: RedisMessageCache, where: str) -> None:
    """Check that the store is bound to cache (CacheMismatch if not); bind a new store to it.

    A new store takes the cache over: its prefix is emptied and holds the store's binding.
    When Redis does not answer, the cache is used only once it is found to hold the
    store's binding (``RedisMessageCache.expect``); the store is read meanwhile.
    """
    if backend.binding is None:
        raise ConfigError(
            "this store backend records no cache binding (Backend.binding, docs/plugins.md): "
            'it cannot be put behind a cache; set cache.backend = "none"'
        )
    from imbucket.adapters.redis_client import REDIS_ERRORS

    proposed = new_binding()
    recorded = backend.binding.record(proposed)
    if recorded == NO_CACHE:
        check_cached(recorded, None, where)
    try:
        if recorded == proposed:
            cache.bind(proposed)
            return
        found = cache.binding()
    except REDIS_ERRORS as error:
        log.warning(
            "redis cache at %s unreachable (%s): reading the store until it answers", where, error
        )
        cache.expect(recorded, claim=recorded == proposed)
        return
    check_cached(recorded, found, where)


def cached(
    backend: Backend,
    cache: ViewCache,
    staleness_seconds: float = DEFAULT_CACHE_STALENESS_SECONDS,
    ttl_seconds: float = DEFAULT_CACHE_TTL_SECONDS,
    probe: HealthProbe | None = None,
) -> Backend:
    """The backend behind cache: the one wiring of a cached backend (container and tests).

    The store reads through the cache and invalidates after each write; the seq store drops
    the cached watermarks after each write that moves one, and so does the backend's one-step
    send (``fresh_sends``) after its step; the backend's fused mark-read invalidates the seqs
    it changed; pulls ask the cache first and, on a miss, the backend's fused reads (else the
    bare store and seq store, separately).
    When the backend keeps an invalidation log, what the cache refuses goes through it
    (``RelayedCache``, bound staleness_seconds); probe answers the service's health call.
    """
    from imbucket.adapters.cached_store import CachedMessageStore
    from imbucket.adapters.cached_views import (
        CachedViews,
        InvalidatingReadMarks,
        InvalidatingSeqStore,
        invalidating_fresh_sends,
    )
    from imbucket.adapters.relayed_cache import RelayedCache
    from imbucket.app.views import pull_reads

    if backend.invalidation_log is not None:
        cache = RelayedCache(
            cache, backend.invalidation_log, staleness=staleness_seconds, ttl_seconds=ttl_seconds
        )
    fallback = pull_reads(backend.store, backend.seqs, backend.views)
    marks, fresh = backend.read_marks, backend.fresh_sends
    return Backend(
        CachedMessageStore(backend.store, cache),
        InvalidatingSeqStore(backend.seqs, cache),
        backend.version,
        CachedViews(fallback, backend.store, cache),
        None if marks is None else InvalidatingReadMarks(marks, cache),
        cache_probe=probe,
        fresh_sends=None if fresh is None else invalidating_fresh_sends(fresh, cache),
    )
