"""Bytes an engine writes to its log (WAL, redo log), read from outside the store.

Used by the benchmark's write-amplification section, never by the stores: a meter reads
the engine's own counter before and after a workload's loop, on a connection of its own
(a raw DBAPI cursor, so the round-trip counters never see it).

- PostgreSQL: ``pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')``, the WAL position in bytes.
- MariaDB/MySQL: ``SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'``, redo log bytes written.
- SQLite (the stores run it in WAL mode): frames appended to the ``-wal`` file, times the
  frame size (page size + 24 bytes of frame header), read from the wal-index header in the
  ``-shm`` file (its ``mxFrame``, SQLite's documented WAL format). The WAL file's size alone
  would miss most writes: after a checkpoint SQLite rewrites the file from its start. The
  meter therefore looks after every operation (``after_op``, a 48-byte read) and, when the
  log restarted (its salt changed), counts the frames since the restart.

PostgreSQL's and MariaDB's counters are server-wide: whatever else writes to the server
during the loop (other sessions, autovacuum, purge threads) is counted too.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Protocol

_FRAME_HEADER = 24  # bytes before each page in a WAL frame
_INDEX_HEADER = struct.Struct("=IIIBBHII2I2I2I")  # WalIndexHdr, native byte order


class LogMeter(Protocol):
    """Bytes an engine wrote to its log since ``begin``."""

    source: str  # what is counted, for the report

    def begin(self) -> None:
        """Start counting (before a workload's loop)."""
        ...

    def after_op(self) -> None:
        """Called after every operation, untimed (SQLite follows log restarts here)."""
        ...

    def written(self) -> int:
        """Bytes written to the log since ``begin``."""
        ...

    def close(self) -> None:
        """Release the meter's connection or file."""
        ...


class Unmetered(Exception):
    """The engine's log cannot be read here; the message says why."""


def log_meter(url: str) -> LogMeter:
    """A meter of the log of the store at url; raises Unmetered with the reason."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme in {"postgresql", "postgres"}:
        return _ServerCounter(
            url,
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')",
            "PostgreSQL WAL: pg_current_wal_lsn() delta (server-wide)",
        )
    if scheme in {"mysql", "mariadb"}:
        if _several_hosts(url):
            raise Unmetered("not measured: the URL names several nodes, each writing its own log")
        return _ServerCounter(
            url,
            "SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'",
            "InnoDB redo log: Innodb_os_log_written delta (server-wide)",
        )
    if scheme == "sqlite":
        return _SqliteWal(url)
    if scheme.startswith("mongodb"):
        raise Unmetered("not measured: no journal counter is read on MongoDB")
    raise Unmetered("no log: the store runs in process")


def _several_hosts(url: str) -> bool:
    """Whether a URL names several servers in its query (``?host=a:3306&host=b``)."""
    from sqlalchemy import make_url

    hosts = make_url(url).query.get("host", ())
    return not isinstance(hosts, str) and len(hosts) > 1


class _ServerCounter:
    """A server's byte counter of its log, read with one statement on a connection of its own."""

    def __init__(self, url: str, query: str, source: str) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.source = source
        self._query = query
        self._engine = create_engine(url, poolclass=NullPool)
        try:
            self._connection: Any = self._engine.raw_connection()
            self._start = self._read()
        except Exception as error:  # any failure: the log is not measured, say why
            self._engine.dispose()
            raise Unmetered(f"not measured: {type(error).__name__}: {error}") from None

    def _read(self) -> int:
        cursor = self._connection.cursor()
        try:
            cursor.execute(self._query)
            row = cursor.fetchone()
        finally:
            cursor.close()
        self._connection.commit()  # end the read transaction: the next read sees new writes
        return int(row[-1])

    def begin(self) -> None:
        self._start = self._read()

    def after_op(self) -> None:
        pass

    def written(self) -> int:
        return self._read() - self._start

    def close(self) -> None:
        self._connection.close()
        self._engine.dispose()


class _SqliteWal:
    """Frames appended to an SQLite database's WAL, from the wal-index header in ``-shm``."""

    source = "SQLite WAL: frames appended × (page size + 24), from the -shm wal-index"

    def __init__(self, url: str) -> None:
        from sqlalchemy import make_url

        database = make_url(url).database
        if not database or database == ":memory:":
            raise Unmetered("not measured: an in-memory SQLite database keeps no WAL")
        self._path = f"{database}-shm"
        self._fd: int | None = None
        self._written = 0
        self._last: tuple[int, int, int] = (0, 0, 0)  # frames, salt, frame bytes

    def _header(self) -> tuple[int, int, int]:
        """mxFrame, the first salt and the frame size; zeros before the WAL exists."""
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDONLY)
            except FileNotFoundError:
                return 0, 0, 0
        for _ in range(3):  # two copies of the header: equal unless a writer is mid-update
            raw = os.pread(self._fd, 2 * _INDEX_HEADER.size, 0)
            if len(raw) < 2 * _INDEX_HEADER.size:
                return 0, 0, 0
            if raw[: _INDEX_HEADER.size] == raw[_INDEX_HEADER.size :]:
                break
        fields = _INDEX_HEADER.unpack(raw[: _INDEX_HEADER.size])
        page = fields[5]
        page = 65536 if page == 1 else page
        return fields[6], fields[10], page + _FRAME_HEADER  # mxFrame, aSalt[0]

    def begin(self) -> None:
        self._written = 0
        self._last = self._header()

    def after_op(self) -> None:
        frames, salt, size = self._header()
        before, before_salt, _ = self._last
        restarted = salt != before_salt or frames < before
        self._written += (frames if restarted else frames - before) * size
        self._last = (frames, salt, size)

    def written(self) -> int:
        self.after_op()
        return self._written

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
