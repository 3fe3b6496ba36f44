"""HealthProbe: whether a part of the service (the store, the cache) answers right now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Reachability:
    """One part's answer: what it is, whether it is usable now, and why not."""

    component: str  # "store" or "cache"
    backend: str  # the configured backend id, e.g. "sql-bucket" or "redis"
    reachable: bool
    detail: str = ""  # what failed, and what to fix, when not reachable


class HealthProbe(Protocol):
    """Asks its part once, live, within that part's configured timeouts; never raises."""

    def probe(self) -> Reachability:
        """Whether the part answers now (and, for a cache, is confirmed for this store)."""
        ...


@dataclass(frozen=True, slots=True)
class Health:
    """What ``MessageService.health`` found: the store's and the cache's reachability.

    ``ready`` is False when either cannot be used. A service whose cache is unreachable
    still answers every call right, from the store; a readiness probe that should keep such
    a service in rotation checks ``store.reachable`` alone.
    """

    store: Reachability
    cache: Reachability | None = None  # None: no cache is configured

    @property
    def ready(self) -> bool:
        """Whether the store, and the cache if there is one, can be used now."""
        return self.store.reachable and (self.cache is None or self.cache.reachable)
