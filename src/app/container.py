"""Dependency-injector container: picks adapters from config without touching unselected ones.

Backend factories live in ``imbucket.app.backends`` and import their drivers only when called, so a
configuration naming ``memory`` never imports pymongo or connects anywhere.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.app import backends
from imbucket.app.service import MessageService
from imbucket.app.settings import layout_of, limits_of, tag_budget
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout


def _backend_selector(
    config: providers.Configuration,
    layout: providers.Provider[BucketLayout],
    budget: providers.Provider[TagBudget],
) -> providers.Selector[backends.Backend]:
    timeouts = providers.Singleton(
        Timeouts,
        connect=config.store.connect_timeout_seconds,
        statement=config.store.statement_timeout_seconds,
        pool=config.store.pool_timeout_seconds,
        reconnect=config.store.reconnect_timeout_seconds,
    )
    pool = providers.Singleton(
        PoolSize, size=config.store.pool_size, overflow=config.store.max_overflow
    )
    # Only the SQL factories keep a connection pool of their own to size.
    sized = {name: {"pool": pool} for name in backends.SQL_FACTORIES}
    choices = {
        name: providers.Singleton(
            factory,
            url=config.store.url,
            layout=layout,
            budget=budget,
            timeouts=timeouts,
            **sized.get(name, {}),
        )
        for name, factory in backends.STORE_FACTORIES.items()
    }
    # Every third-party backend shares one branch; its entry point is loaded only when selected.
    plugin = providers.Singleton(
        backends.open_plugin,
        name=config.store.backend,
        url=config.store.url,
        layout=layout,
        budget=budget,
        timeouts=timeouts,
    )
    branch = providers.Callable(backends.branch_of, config.store.backend)
    return providers.Selector(branch, **choices, **{backends.PLUGIN_BRANCH: plugin})


def _cached(
    config: providers.Configuration,
    backend: providers.Provider[backends.Backend],
    cluster: bool,
) -> providers.Singleton[backends.Backend]:
    """The backend behind the Redis read cache, on one Redis or on a cluster."""
    return providers.Singleton(
        backends.redis_cached,
        backend=backend,
        url=config.cache.url,
        ttl_seconds=config.cache.ttl_seconds,
        key_prefix=config.cache.key_prefix,
        connect_timeout=config.cache.connect_timeout_seconds,
        socket_timeout=config.cache.socket_timeout_seconds,
        cluster=cluster,
    )


class Container(containers.DeclarativeContainer):
    """Wires MessageService from a config dict shaped like ``imbucket.app.settings.Settings``."""

    config = providers.Configuration(strict=True)

    layout = providers.Singleton(layout_of, config)
    limits = providers.Singleton(limits_of, config)
    budget = providers.Singleton(tag_budget, config)

    backend = _backend_selector(config, layout, budget)
    # What the service runs on: the backend, or the backend behind the cache (store, seq store
    # and pull reads on one cache).
    served = providers.Selector(
        config.cache.backend,
        none=providers.Singleton(backends.uncached, backend),
        redis=_cached(config, backend, cluster=False),
        **{"redis-cluster": _cached(config, backend, cluster=True)},
    )
    store = providers.Callable(backends.store_of, served)
    seqs = providers.Callable(backends.seqs_of, served)
    views = providers.Callable(backends.views_of, served)
    # A cached backend has none: its tag writes go through the cache (to invalidate).
    read_marks = providers.Callable(backends.read_marks_of, served)
    version = providers.Callable(backends.version_of, backend)

    service = providers.Singleton(
        MessageService,
        store=store,
        seqs=seqs,
        views=views,
        read_marks=read_marks,
        limits=limits,
        claim_retention_seconds=config.store.send_claim_retention_seconds,
    )
