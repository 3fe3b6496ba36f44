"""Bytes of the replies the drivers receive, counted while a block runs.

Used by the benchmark to compare a pull of a slot with many deleters against the same pull
with none (the deleter-bytes target); never by the stores. What is counted is the reply's payload
as each driver hands it over, without the protocol's framing:

- SQLAlchemy: the values of every row fetched (an ``after_cursor_execute`` listener puts a
  counting proxy in front of the statement's DBAPI cursor; the prepared reads of
  ``adapters.sql.prepared`` fetch through the same proxy): text by its UTF-8 length,
  bytes by length, numbers 8 bytes, NULL nothing, JSON the driver decoded by its JSON text.
- pymongo: each reply's BSON size (a global ``CommandListener``; like round trips, call
  ``prepare`` before a MongoDB client is created).
- redis-py: the replies of ``execute_command`` and of pipelines' ``execute``, single node
  and cluster, sized like SQL values.
- memory: what the in-process bucket repository's reads hand back (each slot as compact
  JSON), so the same pins hold on the reference backend.

Counting costs time (every value is sized), so the benchmark counts only on the workloads
that ask for it, never on those it times for the latency tables' sake alone.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from imbucket.adapters.codec import slot_to_doc
from imbucket.adapters.memory import MemoryBucketRepository
from imbucket.domain.model import Slot

# The memory repository's reads: what a driver would receive from a server engine.
_MEMORY_READS = ("read", "read_viewed", "read_spilled")
_lock = threading.Lock()
_active: list[Counter[str]] = []
_mongo_registered = False


def size(value: Any) -> int:
    """Bytes a decoded reply value stands for (see the module docstring)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, bool | int | float):
        return 8
    if isinstance(value, list | tuple | set | frozenset):
        return sum(size(item) for item in value)
    if isinstance(value, dict):
        return len(json.dumps(value, default=str))
    if isinstance(value, Slot):
        return len(json.dumps(slot_to_doc(value), separators=(",", ":")))
    return len(str(value).encode())


def _add(driver: str, amount: int) -> None:
    for counter in list(_active):
        counter[driver] += amount


class _CountingCursor:
    """A DBAPI cursor that counts the rows fetched through it."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            _add("sql", size(row))
            yield row

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        _add("sql", size(row))
        return row

    def fetchmany(self, *args: Any) -> Any:
        rows = self._cursor.fetchmany(*args)
        _add("sql", size(rows))
        return rows

    def fetchall(self) -> Any:
        rows = self._cursor.fetchall()
        _add("sql", size(rows))
        return rows


def _watch_sqlalchemy() -> Callable[[], None]:
    """Count the rows of every statement: SQLAlchemy's results and the prepared reads."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from imbucket.adapters.sql import prepared

    def listener(conn: Any, cursor: Any, sql: str, params: Any, context: Any, *_: Any) -> None:
        if context is not None and context.cursor is cursor:
            context.cursor = _CountingCursor(cursor)

    fetch_all = prepared.fetch_all

    def counted_fetch_all(cursor: Any) -> list[Any]:
        return fetch_all(_CountingCursor(cursor))

    def undo() -> None:
        event.remove(Engine, "after_cursor_execute", listener)
        prepared.fetch_all = fetch_all

    event.listen(Engine, "after_cursor_execute", listener)
    prepared.fetch_all = counted_fetch_all
    return undo


def prepare() -> None:
    """Register the pymongo listener (once); do it before any MongoDB client is created."""
    global _mongo_registered
    try:
        import bson
        from pymongo import monitoring
    except ImportError:
        return

    class Listener(monitoring.CommandListener):
        def started(self, event: monitoring.CommandStartedEvent) -> None:
            """Nothing to do: replies are counted."""

        def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
            if _active:
                _add("mongo", len(bson.encode(event.reply)))

        def failed(self, event: monitoring.CommandFailedEvent) -> None:
            """Nothing to do: a failed command's reply carries no data."""

    with _lock:
        if not _mongo_registered:
            monitoring.register(Listener())
            _mongo_registered = True


def _watch_redis() -> Callable[[], None]:
    try:
        from redis.client import Pipeline, Redis
        from redis.cluster import ClusterPipeline, RedisCluster
    except ImportError:
        return lambda: None
    # A pipeline's execute_command only queues (and returns the pipeline): not a reply.
    undo = [_wrap(kind, "execute_command") for kind in (Redis, RedisCluster)]
    undo += [_wrap(kind, "execute") for kind in (Pipeline, ClusterPipeline)]

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


def _watch_memory() -> Callable[[], None]:
    undo = [_wrap(MemoryBucketRepository, name, "memory") for name in _MEMORY_READS]

    def restore() -> None:
        for step in reversed(undo):
            step()

    return restore


def _wrap(kind: Any, name: str, driver: str = "redis") -> Callable[[], None]:
    """Count the replies of kind.name (a client's call) as driver's while counting."""
    original = vars(kind)[name]

    def counted(self: Any, *args: Any, **options: Any) -> Any:
        reply = original(self, *args, **options)
        _add(driver, size(reply))
        return reply

    setattr(kind, name, counted)
    return lambda: setattr(kind, name, original)


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """Bytes received per driver (``sql``, ``mongo``, ``redis``, ``memory``) in the block.

    Not re-entrant across threads' blocks: one counting block at a time (the benchmark runs
    one operation at a time).
    """
    counter: Counter[str] = Counter()
    with _lock:
        if _active:
            raise RuntimeError("received.counting() is already active")
        undo = [_watch_sqlalchemy(), _watch_redis(), _watch_memory()]
        _active.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            _active.remove(counter)
            for restore in reversed(undo):
                restore()
