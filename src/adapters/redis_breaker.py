"""Breaker: the Redis cache's circuit breaker, per Redis or per cluster master (a scope).

After a failure the scope is skipped (callers go to the store) and tried again at most once
per ``retry_interval``; an outage is logged when it starts, again every ``warning_interval``
while it lasts, and once more when the scope answers again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Health:
    """Outage bookkeeping of one Redis (or one cluster master)."""

    down_since: float | None = None
    last_failure: float = 0.0
    warned_at: float = float("-inf")


class Breaker:
    """Per-scope outage state; thread-safe. ``log`` is the cache's logger."""

    def __init__(
        self,
        retry_interval: float,
        warning_interval: float,
        clock: Callable[[], float],
        log: logging.Logger,
    ) -> None:
        self._retry_interval = retry_interval
        self._warning_interval = warning_interval
        self._clock = clock
        self._log = log
        self._lock = threading.Lock()
        self._health: dict[str, _Health] = {}

    def usable(self, scope: str) -> bool:
        """False while an outage of scope is recent: skip Redis instead of waiting for timeouts."""
        with self._lock:
            health = self._health.get(scope)
            if health is None or health.down_since is None:
                return True
            return self._clock() - health.last_failure >= self._retry_interval

    def failed(self, error: Exception, scope: str) -> None:
        """Open the breaker for scope; warn when the outage starts and again every interval."""
        with self._lock:
            now = self._clock()
            health = self._health.setdefault(scope, _Health())
            health.last_failure = now
            if health.down_since is None:
                health.down_since = now
            elif now - health.warned_at < self._warning_interval:
                return
            health.warned_at = now
            outage = now - health.down_since
        self._log.warning(
            "redis cache unavailable%s for %.0f s (%s: %s); reading and writing through to the "
            "store until it answers again",
            f" at {scope}" if scope else "",
            outage,
            type(error).__name__,
            error,
        )

    def succeeded(self, scope: str) -> None:
        """Close the breaker for scope; log the end of an outage."""
        with self._lock:
            health = self._health.get(scope)
            if health is None or health.down_since is None:
                return
            outage = self._clock() - health.down_since
            health.down_since = None
        self._log.info(
            "redis cache%s available again after %.1f s", f" at {scope}" if scope else "", outage
        )
