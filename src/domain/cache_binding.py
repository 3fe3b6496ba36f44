"""Which cache fronts a store: the binding a store and its cache both record, and the rule.

A store records at creation which cache fronts it: ``NO_CACHE``, or a random token that the
cache (one Redis, under one key prefix) holds too. Every service compares both at open, so a
writer that would bypass the cache (no cache, another Redis, another key prefix) is refused
instead of leaving the cache serving what it changed.
"""

from __future__ import annotations

import secrets

from imbucket.domain.errors import CacheMismatch

NO_CACHE = "none"

_SETTINGS = "cache.backend, cache.url and cache.key_prefix"


def new_binding() -> str:
    """A fresh binding token (never NO_CACHE)."""
    return secrets.token_hex(16)


def check_uncached(recorded: str) -> None:
    """Refuse to open, without a cache, a store bound to one (CacheMismatch)."""
    if recorded != NO_CACHE:
        raise CacheMismatch(
            'this store is bound to a Redis cache and is opened with cache.backend = "none": '
            f"its writes would leave that cache stale. Set {_SETTINGS} to the store's cache, "
            "or remove the cache with `imbucket cache detach --config FILE` (FILE naming it)"
        )


def check_cached(recorded: str, found: str | None, cache: str) -> None:
    """Refuse to open a store through a cache it is not bound to (CacheMismatch).

    recorded: the store's binding; found: the binding the cache holds (None: none);
    cache: where the cache is, for the message ("redis://host:6379/0 under prefix 'p'").
    """
    if recorded == NO_CACHE:
        raise CacheMismatch(
            f"this store is bound to no cache and is opened with the cache at {cache}: writers "
            'without it would leave it stale. Set cache.backend = "none", or add the cache '
            "with `imbucket cache attach --config FILE` (FILE naming it)"
        )
    if found != recorded:
        raise CacheMismatch(
            f"the cache at {cache} is not the one this store is bound to (another cache.url "
            "or cache.key_prefix, or that Redis lost its data). Set "
            f"{_SETTINGS} to the store's cache, or bind this one with "
            "`imbucket cache attach --config FILE` (FILE naming it)"
        )
