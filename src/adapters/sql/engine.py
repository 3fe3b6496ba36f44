"""One SQLAlchemy engine per store, chosen by URL, with driver errors turned into domain errors.

Connections run in autocommit mode: almost every operation is one statement, which the server
commits by itself, so no BEGIN/COMMIT round trips are spent. The few operations that need
several statements in one transaction ask for it (``atomic=True``) and get an explicit
BEGIN ... COMMIT on one connection.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Executable,
    Table,
    create_engine,
    event,
    func,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DataError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.dml import Insert

from domain.errors import ConfigError, InvalidArgument, StoreUnavailable

Kind = Literal["sqlite", "postgresql", "mariadb"]
T = TypeVar("T")

DEFAULT_URL = "sqlite://"
_DRIVERS: dict[str, tuple[Kind, str]] = {
    "sqlite": ("sqlite", "sqlite"),
    "postgresql": ("postgresql", "postgresql+psycopg"),
    "mysql": ("mariadb", "mysql+pymysql"),
    "mariadb": ("mariadb", "mysql+pymysql"),
}
_NAMES: dict[Kind, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}
_BEGIN: dict[Kind, str] = {
    "sqlite": "BEGIN IMMEDIATE",
    "postgresql": "BEGIN",
    "mariadb": "START TRANSACTION",
}
# Deadlocks and lock timeouts are the engine asking us to try again; anything else is final.
_RETRIES = 8
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock (PostgreSQL)
_RETRY_MYSQL_CODES = frozenset({1205, 1213})  # lock wait timeout, deadlock (MariaDB)
_MARIADB_SESSION = (
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
    "SESSION tx_isolation = 'READ-COMMITTED'"
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one statement returned: its rows (if any) and its row count."""

    rows: Sequence[Any]
    rowcount: int


class Database:
    """An engine for one URL plus the few SQL spellings that differ between engines.

    SQLite is serialised by a lock (an in-memory database is a single shared connection);
    the servers run statements from many threads on pooled connections.
    """

    def __init__(self, url: str) -> None:
        self.kind, self.engine = _create_engine(url or DEFAULT_URL)
        self._lock: AbstractContextManager[Any] = (
            threading.RLock() if self.kind == "sqlite" else nullcontext()
        )

    def execute(self, statement: Executable) -> Outcome:
        """Run one statement on its own (autocommitted); rows are fetched before returning."""
        return self.run(lambda connection: _outcome(connection.execute(statement)))

    def run(self, work: Callable[[Connection], T], *, atomic: bool = False) -> T:
        """Run work on one connection, retrying on deadlocks; atomic wraps it in a transaction."""
        for attempt in range(_RETRIES):
            try:
                with self._lock, self.engine.connect() as connection:
                    if not atomic:
                        return work(connection)
                    return _in_transaction(connection, _BEGIN[self.kind], work)
            except DBAPIError as error:
                if attempt + 1 < _RETRIES and _retryable(error):
                    time.sleep(random.uniform(0, 0.002 * 2**attempt))
                    continue
                raise translate(error) from error
            except SQLAlchemyError as error:
                raise translate(error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def schema_lock(self) -> Iterator[Connection]:
        """A connection holding a lock that serialises schema creation in this namespace."""
        with self._lock, self.engine.connect() as connection:
            if self.kind == "sqlite":
                # BEGIN IMMEDIATE takes SQLite's write lock, which also covers other processes.
                with _transaction(connection, _BEGIN["sqlite"]):
                    yield connection
            elif self.kind == "postgresql":
                key = "hashtext(current_schema() || ':imbucket')"
                connection.exec_driver_sql(f"SELECT pg_advisory_lock({key})")
                try:
                    yield connection
                finally:
                    connection.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            else:
                _check_mariadb(connection)
                name = "CONCAT('imbucket:', DATABASE())"
                connection.exec_driver_sql(f"SELECT GET_LOCK({name}, 60)")
                try:
                    yield connection
                finally:
                    connection.exec_driver_sql(f"SELECT RELEASE_LOCK({name})")

    def describe(self) -> str:
        """The engine and its version, e.g. "PostgreSQL 15.20"."""
        version = self.run(lambda connection: connection.dialect.server_version_info) or ()
        return f"{_NAMES[self.kind]} {'.'.join(str(part) for part in version)}".strip()

    def insert_ignore(self, table: Table) -> Insert:
        """INSERT that silently skips rows whose primary key exists already."""
        if self.kind == "postgresql":
            return postgresql.insert(table).on_conflict_do_nothing()
        if self.kind == "sqlite":
            return sqlite.insert(table).on_conflict_do_nothing()
        return mysql.insert(table).prefix_with("IGNORE")

    def greatest(self, left: Any, right: Any) -> ColumnElement[Any]:
        """The larger of two values (SQLite's two-argument max is its GREATEST)."""
        if self.kind == "sqlite":
            return func.max(left, right)
        return func.greatest(left, right)

    def close(self) -> None:
        """Close every pooled connection (an in-memory SQLite database is gone afterwards)."""
        self.engine.dispose()


def translate(error: SQLAlchemyError) -> Exception:
    """The domain error for a driver error: bad values are InvalidArgument, the rest unavailable."""
    if isinstance(error, DataError):
        return InvalidArgument(f"the database refused a value: {_reason(error)}")
    return StoreUnavailable(f"database error: {_reason(error)}")


def _create_engine(url: str) -> tuple[Kind, Engine]:
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise ConfigError(f"not a database URL: {url!r}") from error
    backend = parsed.get_backend_name()
    if backend not in _DRIVERS:
        raise ConfigError(
            f"SQL stores take sqlite://, postgresql+psycopg:// or mysql+pymysql:// URLs, "
            f"got {parsed.drivername}://"
        )
    kind, default_driver = _DRIVERS[backend]
    # One dialect name per engine, so that the mysql_* table options always apply.
    if "+" not in parsed.drivername or backend == "mariadb":
        parsed = parsed.set(drivername=default_driver)
    options: dict[str, Any] = {
        "isolation_level": "AUTOCOMMIT",
        "skip_autocommit_rollback": True,
        # The stores read rowcount after INSERT too (to learn whether a row was new).
        "execution_options": {"preserve_rowcount": True},
    }
    if kind == "sqlite":
        options["connect_args"] = {"check_same_thread": False, "timeout": 30}
        if parsed.database in (None, "", ":memory:"):
            options["poolclass"] = StaticPool  # one connection, or every thread sees a new DB
    else:
        options.update(pool_size=10, max_overflow=20, pool_recycle=3600)
        options["pool_reset_on_return"] = None  # autocommit: nothing to roll back on check-in
    if kind == "mariadb":
        options["connect_args"] = {"init_command": _MARIADB_SESSION, "charset": "utf8mb4"}
    try:
        engine = create_engine(parsed, **options)
    except (ArgumentError, NoSuchModuleError, ImportError) as error:
        raise ConfigError(f"cannot use {parsed.drivername}: {error}") from error
    if kind == "sqlite" and options.get("poolclass") is not StaticPool:
        event.listen(engine, "connect", _sqlite_wal)
    return kind, engine


def _check_mariadb(connection: Connection) -> None:
    dialect = connection.dialect
    version = tuple(dialect.server_version_info or ())
    if not getattr(dialect, "is_mariadb", False) or version < (10, 5):
        raise ConfigError(
            f"mysql+pymysql:// URLs need MariaDB 10.5 or later (INSERT … RETURNING), "
            f"the server is {'MariaDB' if getattr(dialect, 'is_mariadb', False) else 'MySQL'} "
            f"{'.'.join(map(str, version))}"
        )


def _sqlite_wal(dbapi_connection: Any, _record: Any) -> None:
    """Readers of a SQLite file need not wait for its writer."""
    dbapi_connection.execute("PRAGMA journal_mode=WAL")


def _in_transaction(connection: Connection, begin: str, work: Callable[[Connection], T]) -> T:
    with _transaction(connection, begin):
        return work(connection)


@contextmanager
def _transaction(connection: Connection, begin: str) -> Iterator[Connection]:
    connection.exec_driver_sql(begin)
    try:
        yield connection
    except BaseException:
        try:
            connection.exec_driver_sql("ROLLBACK")
        except SQLAlchemyError:
            connection.invalidate()  # never hand a connection with an open transaction back
        raise
    connection.exec_driver_sql("COMMIT")


def _outcome(result: Any) -> Outcome:
    rows = result.all() if result.returns_rows else []
    return Outcome(rows, result.rowcount)


def _retryable(error: DBAPIError) -> bool:
    original = error.orig
    if getattr(original, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    code = original.args[0] if original is not None and original.args else None
    if code in _RETRY_MYSQL_CODES:
        return True
    return "database is locked" in str(original)


def _reason(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    return " ".join(str(original if original is not None else error).split())[:300]
