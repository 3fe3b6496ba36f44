"""One factory per cache backend, each registered with its rules in ``imbucket.app.registry``.

A factory takes the opened store backend, ``Settings.cache`` and the cache's ``CacheRules``,
and the keyword ``asynchronous`` (its client on asyncio, for ``imbucket.aio``); it returns the
backend the service runs on.
"""

from __future__ import annotations

from imbucket.app.backends import Backend, redis_cached, uncached
from imbucket.app.registry import CacheRules
from imbucket.app.settings import CacheSettings


def no_cache(
    backend: Backend, settings: CacheSettings, rules: CacheRules, *, asynchronous: bool = False
) -> Backend:
    """The cache backend ``none``: the backend itself, once found bound to no cache."""
    return uncached(backend)


def redis(
    backend: Backend, settings: CacheSettings, rules: CacheRules, *, asynchronous: bool = False
) -> Backend:
    """The cache backends ``redis`` and ``redis-cluster`` (``rules.cluster``), as settings say."""
    return redis_cached(
        backend,
        url=settings.url,
        ttl_seconds=settings.ttl_seconds,
        key_prefix=settings.key_prefix,
        connect_timeout=settings.connect_timeout_seconds,
        socket_timeout=settings.socket_timeout_seconds,
        cluster=rules.cluster,
        staleness_seconds=settings.staleness_seconds,
        warning_interval_seconds=settings.warning_interval_seconds,
        asynchronous=asynchronous,
    )
