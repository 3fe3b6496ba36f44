"""Adding, removing and moving a store's cache: ``imbucket cache attach`` and ``detach``.

A store serves through one cache or none (imbucket.domain.cache_binding); these are the only steps
that change which. Each replaces the store's binding first, so from then on a service that
opens the store with the old configuration is refused, then empties the configured cache's
key prefix, so nothing cached before is served after. Services already running with the old
configuration are not reached: stop them first (docs/redis.md, "One cache per store").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from imbucket.app import open_container
from imbucket.app.backends import Backend
from imbucket.app.registry import CACHES
from imbucket.app.settings import CacheSettings
from imbucket.domain.cache_binding import NO_CACHE, new_binding
from imbucket.domain.errors import ConfigError

if TYPE_CHECKING:
    from imbucket.adapters.redis_cache import RedisMessageCache


def attach(config: Mapping[str, Any] | None = None) -> None:
    """Bind config's store to config's cache (its first cache, or instead of another one).

    ConfigError when config names no cache; the store and the cache must be reachable
    (StoreUnavailable, or ConfigError naming the Redis error: nothing changed on the
    store then, or run it again).
    """
    settings, backend = _open(config)
    if not CACHES.get(settings.backend).rules.fronts:
        raise ConfigError(
            'cache attach needs the cache to attach: set cache.backend = "redis" or '
            '"redis-cluster", cache.url and cache.key_prefix'
        )
    _rebind(backend, settings, new_binding())


def detach(config: Mapping[str, Any] | None = None) -> None:
    """Bind config's store to no cache; empty config's cache, if it names one.

    Afterwards the store opens with ``cache.backend = "none"`` only.
    """
    settings, backend = _open(config)
    _rebind(backend, settings, NO_CACHE)


def _open(config: Mapping[str, Any] | None) -> tuple[CacheSettings, Backend]:
    """The cache settings and the bare backend of config (no binding is checked)."""
    container = open_container(config)
    backend: Backend = container.backend()
    if backend.binding is None:
        _close(backend)
        raise ConfigError("this store backend records no cache binding (docs/plugins.md)")
    return container.settings().cache, backend


def _rebind(backend: Backend, settings: CacheSettings, binding: str) -> None:
    """Store first, then the cache: nobody opens on the old binding while it is emptied."""
    try:
        fronts = CACHES.get(settings.backend).rules.fronts
        cache = _cache(settings) if fronts else None
        try:
            _replace(backend, binding)
            if cache is not None:
                _bind(cache, binding)
        finally:
            if cache is not None:
                cache.close()
    finally:
        _close(backend)


def _replace(backend: Backend, binding: str) -> None:
    record = backend.binding
    assert record is not None  # checked by _open
    current = record.record(binding)
    if current != binding and not record.replace(current, binding):
        raise ConfigError("the store's cache binding changed meanwhile: run the command again")


def _cache(settings: CacheSettings) -> RedisMessageCache:
    try:
        from imbucket.adapters.redis_cache import RedisMessageCache
        from imbucket.adapters.redis_client import REDIS_ERRORS
    except ImportError as error:
        raise ConfigError(f"the cache needs imbucket[redis]: {error}") from None
    try:
        return RedisMessageCache.from_url(
            settings.url,
            cluster=CACHES.get(settings.backend).rules.cluster,
            key_prefix=settings.key_prefix,
            ttl_seconds=settings.ttl_seconds,
            # Emptying a prefix may take many replies: wait for Redis, this is no read path.
            socket_timeout=max(5.0, settings.socket_timeout_seconds),
            connect_timeout=max(5.0, settings.connect_timeout_seconds),
        )
    except ValueError as error:
        raise ConfigError(f"invalid cache url {settings.url!r}: {error}") from None
    except REDIS_ERRORS as error:
        raise ConfigError(f"no cache answers at {settings.url!r}: {error}") from None


def _bind(cache: RedisMessageCache, binding: str) -> None:
    from imbucket.adapters.redis_client import REDIS_ERRORS

    try:
        cache.bind(None if binding == NO_CACHE else binding)
    except REDIS_ERRORS as error:
        raise ConfigError(
            f"the cache at {cache.key_prefix!r} could not be emptied ({error}); the store is "
            "bound already: run the command again once Redis answers"
        ) from None


def _close(backend: Backend) -> None:
    try:
        backend.store.close()
    finally:
        backend.seqs.close()
