"""Round trips counted where they happen: at the database drivers.

Used by the benchmark and the access-pattern tests, never by the stores themselves: nothing
here changes what a store does. Each driver is watched from the outside:

- SQLAlchemy: a ``before_cursor_execute`` listener on the ``Engine`` class, so every engine
  (created before or after) reports each statement sent. Transaction control (BEGIN,
  COMMIT, ROLLBACK, SAVEPOINT) is not counted: the stores run in autocommit and spend it
  only where several statements must be atomic.
- pymongo: a ``CommandListener`` registered globally with ``pymongo.monitoring.register``.
  pymongo only hands global listeners to clients created *after* registration, so call
  ``watch`` before opening a MongoDB-backed service.
- redis-py: ``Redis.execute_command``, ``RedisCluster.execute_command`` and
  ``Pipeline.execute`` are wrapped while watching (a whole pipeline is one round trip).

In-process engines (memory) are counted by ``bench.instrument.probe``, with ``RoundTrips.record``.
``EngineStatements`` counts the statements of one SQLAlchemy engine only, and keeps them (for
tests that pin the statements of one store).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Engine

_SQL_CONTROL = re.compile(
    r"^\s*(BEGIN|START\s+TRANSACTION|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE
)
_SQL_READ = re.compile(r"^\s*(SELECT|SHOW|PRAGMA|EXPLAIN|DESCRIBE|VALUES)\b", re.IGNORECASE)
_SQL_WRITE_INSIDE = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE|REPLACE)\b", re.IGNORECASE)
_MONGO_READS = frozenset(
    {"find", "aggregate", "count", "countDocuments", "distinct", "getMore", "listIndexes",
     "listCollections", "collStats", "dbStats", "buildInfo", "serverStatus", "hello", "ping",
     "isMaster", "ismaster"}
)  # fmt: skip
_REDIS_READS = frozenset(
    {"GET", "MGET", "HGET", "HMGET", "HGETALL", "EXISTS", "TTL", "PTTL", "TYPE", "SCAN",
     "SSCAN", "HSCAN", "ZSCAN", "SMEMBERS", "SISMEMBER", "LRANGE", "LLEN", "ZRANGE",
     "ZRANGEBYSCORE", "ZCARD", "ZSCORE", "STRLEN", "DBSIZE", "INFO", "PING", "MEMORY",
     "KEYS", "HLEN", "SCARD"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Count:
    """Round trips per driver, split into reads and writes."""

    reads_by: Mapping[str, int] = field(default_factory=dict)
    writes_by: Mapping[str, int] = field(default_factory=dict)

    @property
    def reads(self) -> int:
        """Round trips that only read."""
        return sum(self.reads_by.values())

    @property
    def writes(self) -> int:
        """Round trips that write (or try to)."""
        return sum(self.writes_by.values())

    @property
    def total(self) -> int:
        """All round trips."""
        return self.reads + self.writes

    @property
    def drivers(self) -> dict[str, int]:
        """Round trips per driver."""
        merged = Counter(self.reads_by)
        merged.update(self.writes_by)
        return {k: v for k, v in merged.items() if v}

    def without(self, driver: str) -> Count:
        """The same count leaving one driver out (e.g. the cache in front of a store)."""
        return Count(
            {k: v for k, v in self.reads_by.items() if k != driver},
            {k: v for k, v in self.writes_by.items() if k != driver},
        )

    def __sub__(self, earlier: Count) -> Count:
        return Count(
            _minus(self.reads_by, earlier.reads_by), _minus(self.writes_by, earlier.writes_by)
        )


def _minus(later: Mapping[str, int], earlier: Mapping[str, int]) -> dict[str, int]:
    return {k: v - earlier.get(k, 0) for k, v in later.items() if v != earlier.get(k, 0)}


@dataclass
class RoundTrips:
    """Thread-safe running counters of round trips per driver."""

    reads: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, driver: str, write: bool) -> None:
        """Count one round trip sent through driver."""
        with self._lock:
            (self.writes if write else self.reads)[driver] += 1

    def snapshot(self) -> Count:
        """The counts so far; subtract two snapshots to count what happened in between."""
        with self._lock:
            return Count(dict(self.reads), dict(self.writes))


_active: list[RoundTrips] = []
_active_lock = threading.Lock()


def _record(driver: str, write: bool) -> None:
    for counter in list(_active):
        counter.record(driver, write)


def sql_is_control(statement: str) -> bool:
    """Whether a SQL statement is transaction control (BEGIN, COMMIT, …), not counted."""
    return bool(_SQL_CONTROL.match(statement))


def sql_is_write(statement: str) -> bool:
    """Whether a SQL statement writes (reads: SELECT/SHOW/PRAGMA… without a DML inside)."""
    if _SQL_READ.match(statement):
        return False
    if statement.lstrip()[:4].upper() == "WITH":
        return _writes_inside(statement)
    return True


@functools.lru_cache(maxsize=256)
def _writes_inside(statement: str) -> bool:
    """Whether a WITH statement holds a DML, remembered per text.

    The search reads the whole text, and a pull's runs to kilobytes; the stores send the same
    few texts again and again, so a counter searching each time would add its own cost to
    the timed arm whose statements are the longest (the service's, against its raw arm).
    """
    return bool(_SQL_WRITE_INSIDE.search(statement))


def _watch_sqlalchemy() -> Callable[[], None]:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def listener(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not sql_is_control(statement):
            _record("sql", sql_is_write(statement))

    event.listen(Engine, "before_cursor_execute", listener)
    return lambda: event.remove(Engine, "before_cursor_execute", listener)


_mongo_registered = False


def _watch_pymongo() -> Callable[[], None]:
    global _mongo_registered
    try:
        from pymongo import monitoring
    except ImportError:
        return lambda: None

    class Listener(monitoring.CommandListener):
        def started(self, event: monitoring.CommandStartedEvent) -> None:
            _record("mongo", event.command_name not in _MONGO_READS)

        def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
            """Nothing to do: counted when started."""

        def failed(self, event: monitoring.CommandFailedEvent) -> None:
            """Nothing to do: counted when started."""

    # pymongo cannot unregister a global listener: register once, it forwards to _active.
    if not _mongo_registered:
        monitoring.register(Listener())
        _mongo_registered = True
    return lambda: None


def _watch_redis() -> Callable[[], None]:
    try:
        from redis.client import Pipeline, Redis
        from redis.cluster import RedisCluster
    except ImportError:
        return lambda: None
    plain, batch = Redis.execute_command, Pipeline.execute
    # A cluster client sends its commands on node connections, past Redis.execute_command.
    cluster = RedisCluster.execute_command

    def execute_command(self: Any, *args: Any, **options: Any) -> Any:
        _record("redis", str(args[0]).upper() not in _REDIS_READS)
        return plain(self, *args, **options)  # type: ignore[no-untyped-call]

    def cluster_command(self: Any, *args: Any, **options: Any) -> Any:
        _record("redis", str(args[0]).upper() not in _REDIS_READS)
        return cluster(self, *args, **options)  # type: ignore[no-untyped-call]

    def execute(self: Any, *args: Any, **options: Any) -> Any:
        names = {str(command[0][0]).upper() for command in self.command_stack}
        if names:
            _record("redis", not names <= _REDIS_READS)
        return batch(self, *args, **options)

    Redis.execute_command = execute_command  # type: ignore[method-assign]
    RedisCluster.execute_command = cluster_command  # type: ignore[method-assign]
    Pipeline.execute = execute  # type: ignore[method-assign]

    def restore() -> None:
        Redis.execute_command = plain  # type: ignore[method-assign]
        RedisCluster.execute_command = cluster  # type: ignore[method-assign]
        Pipeline.execute = batch  # type: ignore[method-assign]

    return restore


_undo: list[Callable[[], None]] = []


@contextmanager
def watch(counter: RoundTrips) -> Iterator[RoundTrips]:
    """Count every driver round trip into counter while the block runs."""
    with _active_lock:
        if not _active:
            _hook()
        _active.append(counter)
    try:
        yield counter
    finally:
        with _active_lock:
            _active.remove(counter)
            if not _active:
                _unhook()


@contextmanager
def unwatched() -> Iterator[None]:
    """Nothing counted and no counting hook in place while the block runs, then as before.

    For an arm timed against one the hooks never see (a raw DBAPI cursor): the counting's
    own cost would be charged to the hooked arm alone.
    """
    with _active_lock:
        watching = list(_active)
        _active.clear()
        _unhook()
    try:
        yield
    finally:
        with _active_lock:
            if watching and not _active:
                _hook()
            _active[:0] = watching


def _hook() -> None:
    _undo.extend(hook() for hook in (_watch_sqlalchemy, _watch_pymongo, _watch_redis))


def _unhook() -> None:
    while _undo:
        _undo.pop()()


class EngineStatements:
    """The data statements one SQLAlchemy engine sends while attached (a context manager).

    Usage::

        with EngineStatements(service.store.engine) as trips:
            service.pull_latest(conversation, viewer)
        trips.total, trips.reads, trips.writes, trips.statements
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []
        self._lock = threading.Lock()

    def __enter__(self) -> EngineStatements:
        from sqlalchemy import event

        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from sqlalchemy import event

        event.remove(self.engine, "before_cursor_execute", self._seen)

    @property
    def total(self) -> int:
        """Statements sent."""
        return len(self.statements)

    @property
    def writes(self) -> int:
        """Statements that change rows (INSERT, UPDATE, DELETE, …)."""
        return sum(1 for statement in self.statements if sql_is_write(statement))

    @property
    def reads(self) -> int:
        """Statements that only read."""
        return self.total - self.writes

    def reset(self) -> None:
        """Forget what was counted so far."""
        with self._lock:
            self.statements.clear()

    def _seen(self, connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not sql_is_control(statement):
            with self._lock:
                self.statements.append(statement)
