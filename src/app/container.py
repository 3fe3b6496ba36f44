"""The composition root: typed Settings in, a wired MessageService out.

Every default and backend rule is applied here once: the bucket encoding a backend writes when
none is set, the tag budget, the timeouts and pool size, which factory opens the backend (one
registry, ``imbucket.app.registry``, for built-in backends and plugins alike), which cache
fronts it (its ``CACHES``) and whether they open asyncio drivers. Factories import their
drivers only when called, so a configuration naming ``memory`` never imports pymongo or
connects anywhere.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.app import backends
from imbucket.app.backends import Backend
from imbucket.app.coalescing import coalesced
from imbucket.app.registry import CACHES, REGISTRY
from imbucket.app.service import MessageService
from imbucket.app.settings import Settings, bucket_bounds, limits_of
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout


def layout_of(settings: Settings) -> BucketLayout:
    """The bucket size, and the encoding set or else the one the backend writes by default."""
    store = settings.store
    encoding = store.bucket_encoding or REGISTRY.get(store.backend).rules.default_encoding
    return BucketLayout(store.bucket_size, encoding)


def tag_budget(settings: Settings) -> TagBudget:
    """The inline limits the bucket stores enforce under settings."""
    return bucket_bounds(settings).budget()


def timeouts_of(settings: Settings) -> Timeouts:
    """The bounds of every wait of a store call."""
    store = settings.store
    return Timeouts(
        connect=store.connect_timeout_seconds,
        statement=store.statement_timeout_seconds,
        pool=store.pool_timeout_seconds,
        reconnect=store.reconnect_timeout_seconds,
    )


def call_bound(timeouts: Timeouts) -> float:
    """The longest a store call may take: a coalesced pull waits no longer for its read."""
    return timeouts.call


def pool_of(settings: Settings) -> PoolSize:
    """The connections a pooled (SQL) store keeps on a server."""
    return PoolSize(size=settings.store.pool_size, overflow=settings.store.max_overflow)


def open_backend(
    settings: Settings,
    layout: BucketLayout,
    budget: TagBudget,
    timeouts: Timeouts,
    pool: PoolSize,
    asynchronous: bool,
) -> Backend:
    """The selected backend, opened by its registered factory (a plugin's loaded only now).

    asynchronous: on asyncio drivers, for ``imbucket.aio``. A plugin whose store turns out to
    be a ``BucketMessageStore`` gets the bucket arithmetic checked like a built-in bucket
    backend (ConfigError; the backend is closed again).
    """
    registration = REGISTRY.get(settings.store.backend)
    url = settings.store.url
    backend = registration.open(url, layout, budget, timeouts, pool, asynchronous=asynchronous)
    if registration.rules.layout is None and isinstance(backend.store, BucketMessageStore):
        try:
            bucket_bounds(settings).check()
        except BaseException:
            backend.store.close()
            backend.seqs.close()
            raise
    return backend


def cache_in_front(backend: Backend, settings: Settings, asynchronous: bool) -> Backend:
    """What the service runs on: the backend behind the configured cache backend, or as it is.

    asynchronous: the cache on its asyncio client, for ``imbucket.aio``.
    """
    cache = CACHES.get(settings.cache.backend)
    factory = cache.load()
    return factory(backend, settings.cache, cache.rules, asynchronous=asynchronous)


class Container(containers.DeclarativeContainer):
    """Wires MessageService from typed ``Settings`` (``imbucket.app.open_container``)."""

    settings = providers.Dependency(instance_of=Settings)
    # Whether the backends open their drivers' asyncio mode: imbucket.aio passes True.
    asynchronous = providers.Object(False)

    layout = providers.Singleton(layout_of, settings)
    limits = providers.Singleton(limits_of, settings)
    budget = providers.Singleton(tag_budget, settings)
    timeouts = providers.Singleton(timeouts_of, settings)
    pool = providers.Singleton(pool_of, settings)

    backend = providers.Singleton(
        open_backend, settings, layout, budget, timeouts, pool, asynchronous
    )
    # What the service runs on: the backend, or the backend behind the cache (store, seq store
    # and pull reads on one cache).
    served = providers.Singleton(cache_in_front, backend, settings, asynchronous)
    store = providers.Callable(backends.store_of, served)
    seqs = providers.Callable(backends.seqs_of, served)
    # Pulls read through the backend's fused reads, coalesced into herds when it can.
    views = providers.Callable(
        coalesced,
        providers.Callable(backends.views_of, served),
        providers.Callable(backends.shared_views_of, served),
        settings.provided.service.coalesce_pulls,
        providers.Callable(call_bound, timeouts),
    )
    # Behind a cache both invalidate after their writes (``backends.cached``).
    read_marks = providers.Callable(backends.read_marks_of, served)
    fresh_sends = providers.Callable(backends.fresh_sends_of, served)
    version = providers.Callable(backends.version_of, backend)
    cache_probe = providers.Callable(backends.cache_probe_of, served)

    service = providers.Singleton(
        MessageService,
        store=store,
        seqs=seqs,
        views=views,
        read_marks=read_marks,
        fresh_sends=fresh_sends,
        limits=limits,
        claim_retention_seconds=settings.provided.store.send_claim_retention_seconds,
        cache_probe=cache_probe,
        store_backend=settings.provided.store.backend,
        authority=providers.Callable(backends.store_of, backend),
    )
