"""The log meters of the benchmark's write-amplification section count what the engine wrote.

SQLite: the meter's count equals the WAL file's growth while nothing checkpoints, and keeps
counting after a checkpoint makes SQLite rewrite its WAL from the start (where the file's
size stops growing). PostgreSQL and MariaDB: a write of a 20 kB value shows in the counter.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from imbucket.bench.instrument.wal import Unmetered, log_meter
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

PAGE = 4096
FRAME = PAGE + 24


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, Path]]:
    path = tmp_path / "meter.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={PAGE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # the test decides when to checkpoint
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    yield conn, path
    conn.close()


def _insert(conn: sqlite3.Connection, rows: int, size: int = 3000) -> None:
    for _ in range(rows):
        conn.execute("INSERT INTO t (body) VALUES (?)", ("x" * size,))


def test_sqlite_count_equals_wal_growth_without_checkpoints(
    sqlite_file: tuple[sqlite3.Connection, Path],
) -> None:
    conn, path = sqlite_file
    meter = log_meter(f"sqlite:///{path}")
    wal = Path(f"{path}-wal")
    meter.begin()
    before = wal.stat().st_size
    for _ in range(5):
        _insert(conn, 3)
        meter.after_op()
    grown = wal.stat().st_size - before
    assert grown > 10 * FRAME
    assert meter.written() == grown
    meter.close()


def test_sqlite_keeps_counting_after_the_wal_restarts(
    sqlite_file: tuple[sqlite3.Connection, Path],
) -> None:
    conn, path = sqlite_file
    meter = log_meter(f"sqlite:///{path}")
    wal = Path(f"{path}-wal")
    meter.begin()
    start = wal.stat().st_size
    _insert(conn, 10)
    meter.after_op()
    first = wal.stat().st_size - start
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the next write restarts the WAL
    _insert(conn, 2)
    meter.after_op()
    size = wal.stat().st_size
    assert size == start + first  # the file did not grow: SQLite wrote over its start
    frames_after = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    assert frames_after > 0
    assert meter.written() == first + frames_after * FRAME
    meter.close()


def test_in_process_stores_mongodb_and_several_nodes_are_not_metered() -> None:
    with pytest.raises(Unmetered, match="in process"):
        log_meter("")
    with pytest.raises(Unmetered, match="MongoDB"):
        log_meter("mongodb://127.0.0.1:27017/x")
    with pytest.raises(Unmetered, match="in-memory"):
        log_meter("sqlite://")
    with pytest.raises(Unmetered, match="several nodes"):
        log_meter("mysql+pymysql://root@/db?host=127.0.0.1:3306&host=127.0.0.1:3307")


def _write_20kb(url: str) -> int:
    """Bytes the meter saw while one 20 kB value was inserted at url."""
    meter = log_meter(url)
    engine = create_engine(url)
    table = f"meter_{uuid.uuid4().hex[:8]}"
    try:
        with engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {table} (id INT PRIMARY KEY, body TEXT)"))
        meter.begin()
        with engine.begin() as conn:
            body = secrets.token_hex(10_000)  # 20,000 characters LZ cannot compress
            conn.execute(text(f"INSERT INTO {table} VALUES (1, :body)"), {"body": body})
        return meter.written()
    finally:
        meter.close()
        engine.dispose()


def test_postgres_wal_counts_a_write() -> None:
    with postgres_schema(postgres_server()) as url:
        assert _write_20kb(url) >= 20_000


def test_mariadb_redo_log_counts_a_write() -> None:
    with mariadb_database(mariadb_server()) as url:
        assert _write_20kb(url) >= 20_000
