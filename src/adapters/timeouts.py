"""How long a store waits for its server, per phase of a call (docs/faults.md).

Every wait of a store call is one of these three, and each is bounded: getting a pooled
connection, opening a new one, and waiting for the reply to a statement or command. A call
starts another attempt only while that attempt, at its worst, still ends within
``CALL_BOUND_SECONDS`` of the call's start: with the default settings, every call answers
(a result or ``StoreUnavailable``) within 30 s, retries included.
"""

from __future__ import annotations

from dataclasses import dataclass

# The longest a call may take with the default settings, retries included. With other
# settings, the bound is the larger of this and one attempt's worst case.
CALL_BOUND_SECONDS = 30.0

DEFAULT_CONNECT_SECONDS = 2.0
DEFAULT_STATEMENT_SECONDS = 5.0
DEFAULT_POOL_SECONDS = 2.0
# SQL servers: connections a store keeps open, and how many more it may open under load.
DEFAULT_POOL_SIZE = 10
DEFAULT_MAX_OVERFLOW = 20
# The Redis cache is skipped when slow, so its waits are short (docs/redis.md).
DEFAULT_CACHE_SECONDS = 0.25
# How long the cache keeps an entry (as OpenIM's), how stale a write whose writer could not
# reach the cache may be served by other processes, and how often an outage is logged again.
DEFAULT_CACHE_TTL_SECONDS = 24 * 3600
DEFAULT_CACHE_STALENESS_SECONDS = 1.0
DEFAULT_CACHE_WARNING_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds a store waits for each phase of one attempt.

    connect: open a new connection (TCP, TLS and the handshake/authentication);
    statement: the reply to one statement or command on an open connection (the socket read
    timeout; SQLite: how long to wait for another writer's lock);
    pool: a free connection from the pool when every one is in use;
    reconnect: how long a call keeps trying to open a connection while none can be opened
    (a failover: the old primary is gone and no new one is promoted yet), beyond the few
    attempts every fault gets; 0 (the default) adds none. Still within ``call``.
    """

    connect: float = DEFAULT_CONNECT_SECONDS
    statement: float = DEFAULT_STATEMENT_SECONDS
    pool: float = DEFAULT_POOL_SECONDS
    reconnect: float = 0.0

    def __post_init__(self) -> None:
        for name in ("connect", "statement", "pool"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"timeout {name} must be a positive number, got {value!r}")
        value = self.reconnect
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"timeout reconnect must be a number >= 0, got {value!r}")

    @property
    def attempt(self) -> float:
        """The longest one attempt can wait: a pooled connection, a new one, one reply."""
        return self.pool + self.connect + self.statement

    @property
    def call(self) -> float:
        """No new attempt starts unless it can end within this many seconds of the call."""
        return max(CALL_BOUND_SECONDS, self.attempt)


@dataclass(frozen=True, slots=True)
class PoolSize:
    """How many connections a pooled store holds: size kept open, up to overflow more.

    A call that finds all size + overflow in use waits up to ``Timeouts.pool`` for one.
    """

    size: int = DEFAULT_POOL_SIZE
    overflow: int = DEFAULT_MAX_OVERFLOW

    def __post_init__(self) -> None:
        if self.size < 1 or self.overflow < 0:
            raise ValueError(f"pool size must be >= 1 and overflow >= 0, got {self}")


def millis(seconds: float) -> int:
    """Seconds as whole milliseconds (at least 1), for drivers that take milliseconds."""
    return max(1, round(seconds * 1000))
