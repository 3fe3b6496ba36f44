"""Pages an engine touched and read, counted by the engine itself around a workload's loop.

Used by the benchmark's pages section and the white-box page pins, never by the stores. Every
meter reports two counts since ``begin``: pages *touched* (every page the engine asked its
buffer for, found there or not) and pages *read* (those it had to fetch from the files: its
buffer's misses). Touched pages do not depend on cache state; read pages do.

- PostgreSQL: ``pg_statio_user_tables`` of the store's schema, heap, index and TOAST (with its
  index) blocks, hit + read. A backend publishes its counters only now and then, so the meter
  first runs ``pg_stat_force_next_flush()`` on every idle connection of the store's pool (the
  connections the store ran on), then reads. Counts are the store's own tables only: other
  sessions on a shared server do not touch them.
- MariaDB: ``Innodb_buffer_pool_read_requests`` (touched) and ``Innodb_buffer_pool_reads``
  (read) from ``SHOW GLOBAL STATUS``. These are server-wide: every session and InnoDB's own
  background work (purge, statistics) adds to them, so on a shared server they are an upper
  bound, and exact only on a quiet private instance (``imbucket.bench.instances``).
- SQLite: the page cache's hits and misses of every connection of the store's pool, from
  ``sqlite3_db_status(SQLITE_DBSTATUS_CACHE_HIT / _MISS)`` called through ctypes on the
  library the ``sqlite3`` module runs on. Python's sqlite3 module exposes no handle, so the
  meter reads the ``sqlite3 *`` that CPython keeps first in its connection object and checks
  it (``sqlite3_db_filename`` must name the store's file) before trusting it. The meter sets
  ``mmap_size = 0`` on those connections: with memory mapping a page is read without passing
  through the page cache, and the misses would no longer count the pages read.
- MongoDB and memory: not counted (``Uncounted`` says why).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Protocol

from imbucket.ports.message_store import MessageStore


@dataclass(frozen=True, slots=True)
class PageCount:
    """Pages since ``begin``: touched (hit or read), read (misses), touched by kind of page."""

    touched: int
    read: int
    by_kind: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: PageCount) -> PageCount:
        kinds = dict(self.by_kind)
        for k, v in other.by_kind.items():
            kinds[k] = kinds.get(k, 0) + v
        return PageCount(self.touched + other.touched, self.read + other.read, kinds)

    def __sub__(self, other: PageCount) -> PageCount:
        kinds = {k: v - other.by_kind.get(k, 0) for k, v in self.by_kind.items()}
        return PageCount(self.touched - other.touched, self.read - other.read, kinds)


class PageMeter(Protocol):
    """Pages an engine touched and read since ``begin``."""

    source: str  # what is counted, for the report

    def begin(self) -> None:
        """Start counting (before a workload's loop)."""
        ...

    def pages(self) -> PageCount:
        """Pages since ``begin``."""
        ...

    def close(self) -> None:
        """Release the meter's connection."""
        ...


class Uncounted(Exception):
    """The engine's pages cannot be counted here; the message says why."""


def sql_engine(store: MessageStore) -> Any:
    """The SQLAlchemy engine under store (behind a cache too); Uncounted when not SQL."""
    from imbucket.adapters.cached_store import CachedMessageStore
    from imbucket.adapters.sql import SqlBucketStore, SqlRowStore

    while isinstance(store, CachedMessageStore):
        store = store.store
    if isinstance(store, SqlRowStore | SqlBucketStore):
        return store.engine
    name = type(store).__name__
    if "Mongo" in name:
        raise Uncounted(
            "n/a: MongoDB's keysExamined/docsExamined come from explain, which would replay "
            "every command of the store; the emulator (mongoeco) has no explain either"
        )
    raise Uncounted("n/a: the store runs in process and reads no pages")


def page_meter(store: MessageStore, cache_kib: int | None = None) -> PageMeter:
    """A page meter of store's engine; raises Uncounted with the reason.

    cache_kib bounds SQLite's page cache of every connection (the memory budget).
    """
    engine = sql_engine(store)
    dialect = engine.dialect.name
    if dialect == "postgresql":
        return _PostgresPages(engine)
    if dialect in {"mysql", "mariadb"}:
        return _InnodbPages(engine)
    if dialect == "sqlite":
        return _SqlitePages(engine, cache_kib)
    raise Uncounted(f"n/a: pages are not counted on {dialect}")


_STATIO = (
    "SELECT coalesce(sum(heap_blks_hit), 0), coalesce(sum(heap_blks_read), 0),"
    " coalesce(sum(idx_blks_hit), 0), coalesce(sum(idx_blks_read), 0),"
    " coalesce(sum(toast_blks_hit), 0) + coalesce(sum(tidx_blks_hit), 0),"
    " coalesce(sum(toast_blks_read), 0) + coalesce(sum(tidx_blks_read), 0)"
    " FROM pg_statio_user_tables WHERE schemaname = current_schema()"
)


class _PostgresPages:
    """Block counters of the store's own tables, flushed from the store's connections first."""

    source = (
        "PostgreSQL pg_statio_user_tables of the store's schema: heap, index and TOAST "
        "blocks, hit + read (the store's tables only)"
    )

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._start = self._read()

    def _read(self) -> PageCount:
        idle = max(1, self._engine.pool.checkedin())
        connections = [self._engine.raw_connection() for _ in range(idle)]
        try:
            for connection in connections:  # each publishes what its backend counted
                _execute(connection, "SELECT pg_stat_force_next_flush()")
            row = _execute(connections[0], _STATIO)
        finally:
            for connection in connections:
                connection.close()
        heap_hit, heap_read, idx_hit, idx_read, toast_hit, toast_read = (int(v) for v in row)
        kinds = {
            "heap": heap_hit + heap_read,
            "index": idx_hit + idx_read,
            "toast": toast_hit + toast_read,
        }
        return PageCount(sum(kinds.values()), heap_read + idx_read + toast_read, kinds)

    def begin(self) -> None:
        self._start = self._read()

    def pages(self) -> PageCount:
        return self._read() - self._start

    def close(self) -> None:
        pass


class _InnodbPages:
    """InnoDB's server-wide buffer pool counters, on a connection of the meter's own."""

    source = (
        "InnoDB Innodb_buffer_pool_read_requests (touched) and Innodb_buffer_pool_reads "
        "(read), SHOW GLOBAL STATUS deltas (server-wide)"
    )
    _QUERY = (
        "SHOW GLOBAL STATUS WHERE Variable_name IN "
        "('Innodb_buffer_pool_read_requests', 'Innodb_buffer_pool_reads')"
    )

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self._engine = create_engine(engine.url, poolclass=NullPool)
        try:
            self._connection: Any = self._engine.raw_connection()
            self._start = self._read()
        except Exception as error:  # any failure: pages are not counted, say why
            self._engine.dispose()
            raise Uncounted(f"not counted: {type(error).__name__}: {error}") from None

    def _read(self) -> PageCount:
        cursor = self._connection.cursor()
        try:
            cursor.execute(self._QUERY)
            values = {str(name).lower(): int(value) for name, value in cursor.fetchall()}
        finally:
            cursor.close()
        self._connection.commit()
        touched = values["innodb_buffer_pool_read_requests"]
        return PageCount(touched, values["innodb_buffer_pool_reads"])

    def begin(self) -> None:
        self._start = self._read()

    def pages(self) -> PageCount:
        return self._read() - self._start

    def close(self) -> None:
        self._connection.close()
        self._engine.dispose()


_CACHE_HIT, _CACHE_MISS = 7, 8  # SQLITE_DBSTATUS_CACHE_HIT, SQLITE_DBSTATUS_CACHE_MISS


class _SqlitePages:
    """Page-cache hits and misses of every connection the store's pool opens."""

    source = (
        "SQLite page cache hits + misses (touched) and misses (read, from the file or its "
        "WAL), sqlite3_db_status of every connection, mmap_size = 0"
    )

    def __init__(self, engine: Any, cache_kib: int | None) -> None:
        from sqlalchemy import event

        self._library = _sqlite_library()
        self._file = str(engine.url.database or "")
        self._cache_kib = cache_kib
        self._connections: list[sqlite3.Connection] = []
        self._start = PageCount(0, 0)
        event.listen(engine, "connect", self._opened)
        idle = max(1, getattr(engine.pool, "checkedin", lambda: 1)())
        pooled = [engine.raw_connection() for _ in range(idle)]  # those opened already
        for proxy in pooled:
            if all(c is not proxy.dbapi_connection for c in self._connections):
                self._opened(proxy.dbapi_connection, None)
        for proxy in pooled:
            proxy.close()

    def _opened(self, connection: sqlite3.Connection, _record: Any) -> None:
        connection.execute("PRAGMA mmap_size = 0")
        if self._cache_kib is not None:
            connection.execute(f"PRAGMA cache_size = -{max(1, self._cache_kib)}")
        self._connections.append(connection)

    def _read(self) -> PageCount:
        hits = misses = 0
        for connection in self._connections:
            handle = _handle(connection, self._library, self._file)
            if handle is None:
                continue  # closed: its counts went with it (the pool keeps its connections)
            hits += _status(self._library, handle, _CACHE_HIT)
            misses += _status(self._library, handle, _CACHE_MISS)
        return PageCount(hits + misses, misses)

    def begin(self) -> None:
        self._start = self._read()

    def pages(self) -> PageCount:
        return self._read() - self._start

    def close(self) -> None:
        self._connections.clear()


def _sqlite_library() -> Any:
    """The SQLite library the sqlite3 module runs on, with the two functions the meter calls."""
    import _sqlite3

    try:  # linked statically into the module, or the shared library it loaded
        library: Any = ctypes.CDLL(_sqlite3.__file__)
        library.sqlite3_db_status  # noqa: B018  (raises AttributeError when absent)
    except (OSError, AttributeError):
        name = ctypes.util.find_library("sqlite3")
        if name is None:
            raise Uncounted("not counted: the SQLite library is not found") from None
        library = ctypes.CDLL(name)
    library.sqlite3_db_status.argtypes = (
        [ctypes.c_void_p, ctypes.c_int] + [ctypes.POINTER(ctypes.c_int)] * 2 + [ctypes.c_int]
    )
    library.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    library.sqlite3_db_filename.restype = ctypes.c_char_p
    return library


def _handle(connection: sqlite3.Connection, library: Any, file: str) -> int | None:
    """The ``sqlite3 *`` of an open connection to file, None once it is closed.

    CPython keeps it first after the object header; a pointer that does not name file means
    another layout, and the meter refuses rather than count a wrong object.
    """
    handle = ctypes.c_void_p.from_address(id(connection) + object.__basicsize__).value
    if not handle:
        return None
    named = (library.sqlite3_db_filename(handle, b"main") or b"").decode()
    if file and os.path.realpath(named) != os.path.realpath(file):
        raise Uncounted(f"not counted: unknown layout of Python's sqlite3 connection ({named!r})")
    return int(handle)


def _status(library: Any, handle: int, op: int) -> int:
    current, highest = ctypes.c_int(), ctypes.c_int()
    library.sqlite3_db_status(handle, op, ctypes.byref(current), ctypes.byref(highest), 0)
    return current.value


def _execute(connection: Any, statement: str) -> Any:
    cursor = connection.cursor()
    try:
        cursor.execute(statement)
        row = cursor.fetchone()
    finally:
        cursor.close()
    connection.commit()  # a backend publishes its counters when a transaction ends
    return row
