"""One SQLAlchemy engine per store, chosen by URL, with driver errors turned into domain errors.

Connections run in autocommit mode: almost every operation is one statement, which the server
commits by itself, so no BEGIN/COMMIT round trips are spent. The few operations that need
several statements in one transaction ask for it (``atomic=True``) and get an explicit
BEGIN ... COMMIT on one connection.

Transient failures are tried again a bounded number of times (see docs/faults.md):
a connection that could not be opened, a deadlock, and a connection lost mid-way. A lost
connection leaves the outcome of the statement in flight unknown, so that one is repeated
only for work declared idempotent; other work then raises OutcomeUnknown.

A MariaDB URL may name several servers (``?host=a:3306&host=b:3306``, the nodes of a Galera
cluster): each new connection goes to the next one that answers. A PostgreSQL URL may too,
as libpq reads it (``target_session_attrs=read-write`` finds the primary).
"""

from __future__ import annotations

import asyncio
import enum
import gc
import itertools
import logging
import math
import random
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import orjson
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
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DataError,
    DBAPIError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.dml import Insert

from imbucket.adapters import contention, greenlets
from imbucket.adapters.extras import missing
from imbucket.adapters.sql.sizing import StatementLimits, ask_limits
from imbucket.adapters.sql.watchdog import Watchdog
from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.domain.errors import (
    ConfigError,
    InvalidArgument,
    OutcomeUnknown,
    StoreUnavailable,
    WriteRefused,
)

Kind = Literal["sqlite", "postgresql", "mariadb"]
T = TypeVar("T")

DEFAULT_URL = "sqlite://"
_DRIVERS: dict[str, tuple[Kind, str]] = {
    "sqlite": ("sqlite", "sqlite"),
    "postgresql": ("postgresql", "postgresql+psycopg"),
    "mysql": ("mariadb", "mysql+pymysql"),
    "mariadb": ("mariadb", "mysql+pymysql"),
}
# Under imbucket.aio (greenlets.async_drivers): the asyncio driver for each engine, unless the
# URL names another asyncio driver itself.
_ASYNC_DEFAULTS: dict[Kind, str] = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "mariadb": "mysql+aiomysql",
}
_ASYNC_DRIVER_NAMES = frozenset({"aiosqlite", "psycopg", "psycopg_async", "asyncpg", "aiomysql"})
_NAMES: dict[Kind, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}
_BEGIN: dict[Kind, str] = {
    "sqlite": "BEGIN IMMEDIATE",
    "postgresql": "BEGIN",
    "mariadb": "START TRANSACTION",
}
_log = logging.getLogger(__name__)


class Fault(enum.Enum):
    """A transient failure of one attempt, and what it leaves behind."""

    UNREACHABLE = "could not connect"  # nothing was sent, or the server refused it unrun
    ROLLED_BACK = "connection lost inside a transaction"  # the server rolled it back
    LOST = "connection lost"  # the statement in flight may or may not have been applied
    CONTENTION = "deadlock or lock timeout"  # the engine undid the statement and asks again


# Attempts in all (the first one included) before a fault becomes the caller's error. A lost
# connection is usually one stale pooled connection (the server restarted or killed it):
# the second attempt opens a new one. Deadlocks clear up by themselves, given a few tries.
ATTEMPTS: dict[Fault, int] = {
    Fault.UNREACHABLE: 3,
    Fault.ROLLED_BACK: 3,
    Fault.LOST: 3,
    Fault.CONTENTION: 8,
}
# Several MariaDB servers named in one URL are the masters of a Galera cluster: writers on
# other nodes make certification failures far likelier than local deadlocks, and a hot row
# (a conversation's seq counter, a group's bucket) can lose several rounds in a row.
MULTI_MASTER_CONTENTION_ATTEMPTS = 32
# Full jitter: after attempt k, a random wait of 0 .. 2 ms * 2**(k - 1), at most 250 ms.
_WAIT_BASE = 0.002
_WAIT_MAX = 0.25
# Deadlocks and lock timeouts are the engine asking us to try again.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock (PostgreSQL)
# Lock wait timeout, deadlock (MariaDB); on Galera, 1213 is also a certification failure:
# another node committed a conflicting write first, and this transaction was rolled back.
# 1684: a table skipped while a concurrent DDL changes it (Galera replicates every
# CREATE TABLE IF NOT EXISTS of a store being opened on another node).
_RETRY_MYSQL_CODES = frozenset({1205, 1213, 1684})
# A Galera node outside the primary component refuses every statement unrun ("WSREP has not
# yet prepared node for application use"): the connection is dropped, the next goes elsewhere.
_NOT_READY_MYSQL_CODES = frozenset({1047})
# A statement over MariaDB's max_allowed_packet; the same from SQLite and psycopg by message.
_TOO_LARGE_MYSQL_CODES = frozenset({1153, 1301})
_TOO_LARGE_SIGNS = ("too many SQL variables", "string or blob too big", "number of parameters")
# Faults of the configuration, not of the moment: another attempt fails the same way, so
# they are ConfigErrors at once, with the fix. What each class of fault asks the user to do:
_FIX_DATABASE = "create that database, or name an existing one in store.url"
_FIX_LOGIN = "check the user and password in store.url and what the server grants them"
_FIX_SCHEMA = (
    "create the schema search_path names (CREATE SCHEMA …), or point search_path in "
    "store.url (options=-csearch_path=…) at an existing one"
)
_FIX_NO_DATABASE = "name a database in store.url (mysql+pymysql://user@host/<database>)"
_CONFIG_SQLSTATES = {
    "3D000": _FIX_DATABASE,  # invalid_catalog_name
    "28000": _FIX_LOGIN,  # invalid_authorization_specification
    "28P01": _FIX_LOGIN,  # invalid_password
    "3F000": _FIX_SCHEMA,  # invalid_schema_name
}
_CONFIG_MYSQL_CODES = {
    1049: _FIX_DATABASE,  # unknown database
    1044: _FIX_LOGIN,  # access denied to the database
    1045: _FIX_LOGIN,  # access denied (password)
    1698: _FIX_LOGIN,  # access denied (no password)
    1046: _FIX_NO_DATABASE,  # no database selected
}
# libpq reports a refused connection by its message only, without the SQLSTATE.
_CONFIG_POSTGRES_SIGNS = (
    (re.compile(r'database "[^"]*" does not exist'), _FIX_DATABASE),
    (re.compile(r'role "[^"]*" does not exist'), _FIX_LOGIN),
    (re.compile(r"password authentication failed|no pg_hba\.conf entry"), _FIX_LOGIN),
)
_MARIADB_SESSION = (
    "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
    "SESSION tx_isolation = 'READ-COMMITTED'"
)
# On a Galera node: a read first waits until the node has applied every commit the cluster
# acknowledged before it (causal reads), and a statement that lost certification fails with
# 1213 for the store to run again instead of being re-run by the server after its RETURNING
# rows were sent. Off Galera both are no-ops; a server built without Galera lacks them.
_GALERA_SESSION = "SET SESSION wsrep_sync_wait = 1, SESSION wsrep_retry_autocommit = 0"
_UNKNOWN_VARIABLE = 1193


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one statement returned: its rows (if any) and its row count."""

    rows: Sequence[Any]
    rowcount: int


class Database:
    """An engine for one URL plus the few SQL spellings that differ between engines.

    SQLite is serialised by a lock (an in-memory database is a single shared connection);
    the servers run statements from many threads on pooled connections.

    asynchronous (default: whether it is opened inside ``greenlets.async_drivers``): the engine
    is the ``sync_engine`` of an asyncio engine, and every call must run in a greenlet
    (``imbucket.aio``); the statements, retries and bounds are the same.
    """

    def __init__(
        self,
        url: str,
        timeouts: Timeouts | None = None,
        pool: PoolSize | None = None,
        *,
        asynchronous: bool | None = None,
    ) -> None:
        self.timeouts = timeouts or Timeouts()
        if asynchronous is None:
            asynchronous = greenlets.asynchronous()
        self.asynchronous = asynchronous
        self.kind, self.engine = _create_engine(
            url or DEFAULT_URL, self.timeouts, pool, asynchronous
        )
        self._cursors_hold_locks = self.kind == "sqlite" and asynchronous
        self._given = make_url(url or DEFAULT_URL)
        self.attempts = dict(ATTEMPTS)  # per fault, the first attempt included
        if self.kind == "mariadb" and len(_hosts(self._given)) > 1:
            self.attempts[Fault.CONTENTION] = MULTI_MASTER_CONTENTION_ATTEMPTS
        self._lock: AbstractContextManager[Any] = nullcontext()
        if self.kind == "sqlite":
            self._lock = greenlets.GreenletLock() if asynchronous else threading.RLock()
        self._limits: StatementLimits | None = None
        self._held = threading.local()  # the connection of this thread's open batch, if any
        # PostgreSQL: libpq has no read timeout, so a watchdog ends a reply waited for too long;
        # the same for MariaDB's asyncio driver.
        self.watchdog: Watchdog | None = None
        if self.kind == "postgresql" or (self.kind == "mariadb" and asynchronous):
            self.watchdog = Watchdog(self.engine, self.timeouts.statement)

    @property
    def server(self) -> str:
        """The engine and where it is, for messages ("PostgreSQL at 127.0.0.1:5432")."""
        url = self.engine.url
        if self.kind == "sqlite":
            return f"SQLite {url.database or 'in memory'}"
        given = self._given.query.get("host")  # several servers named in the query
        if given:
            return f"{_NAMES[self.kind]} at {given if isinstance(given, str) else ','.join(given)}"
        return f"{_NAMES[self.kind]} at {url.host}:{url.port or ''}".rstrip(":")

    @property
    def in_batch(self) -> bool:
        """Whether this thread's statements run inside an open ``batch``."""
        return getattr(self._held, "connection", None) is not None

    def execute(
        self,
        statement: Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        idempotent: bool = True,
    ) -> Outcome:
        """Run one statement on its own (autocommitted); rows are fetched before returning.

        params binds a statement built once with ``bindparam``; a list of them runs it as
        an executemany (one multi-row INSERT for an INSERT with RETURNING). See run for
        idempotent.
        """
        return self.run(lambda c: _outcome(c.execute(statement, params)), idempotent=idempotent)

    def run(
        self, work: Callable[[Connection], T], *, atomic: bool = False, idempotent: bool = True
    ) -> T:
        """Run work on one connection; atomic wraps it in a transaction.

        Transient faults are tried again up to ATTEMPTS times. Work is idempotent when running
        it twice leaves the same stored state as running it once (every statement of the
        stores but seq allocation): only such work is repeated after a connection was lost
        with its outcome unknown; other work then raises OutcomeUnknown.

        The first attempt runs without any retry machinery (the fast path of every read);
        only a failed attempt enters the retry loop.
        """
        held: Connection | None = getattr(self._held, "connection", None)
        if held is not None:
            return self._in_batch(held, work, atomic=atomic, idempotent=idempotent)
        started = time.monotonic()
        try:
            return self._attempt(work, atomic)
        except _Failure as failure:
            return self._retry(lambda: self._attempt(work, atomic), failure, started, idempotent)

    def _attempt(self, work: Callable[[Connection], T], atomic: bool) -> T:
        """One attempt of work; a transient failure is raised as _Failure."""
        with self._lock:
            connection = self._connect()
            try:
                with connection:
                    if not atomic:
                        return work(connection)
                    return _in_transaction(connection, _BEGIN[self.kind], work)
            except _CommitFailed as failed:
                raise self._failure(failed.error, committing=True) from failed.error
            except SQLAlchemyError as error:
                raise self._failure(error, committing=not atomic) from error

    def _retry(
        self, attempt: Callable[[], T], failure: _Failure, started: float, idempotent: bool
    ) -> T:
        """Attempts after a failed first one (begun at started), while the fault allows it.

        Raises the caller's error (translated) once no further attempt is made.
        """
        attempts = 1
        while self._again(failure, attempts, started, idempotent):
            self._warn(failure, attempts)
            if failure.fault is Fault.CONTENTION and self._cursors_hold_locks:
                # A call cut on an asyncio SQLite store can leave an unfinished statement
                # whose cursor keeps the file's write lock until it is collected.
                gc.collect()
            greenlets.pause(_wait(attempts))
            attempts += 1
            try:
                return attempt()
            except _Failure as again:
                failure = again
        raise failure.translated(self.server, attempts, idempotent) from failure.error

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Run every statement this thread issues inside one transaction until the block ends.

        For bulk loading (``imbucket migrate``): one commit for many statements instead of
        one each. Re-entrant: an inner batch joins the outer one. Inside a batch, atomic
        work runs under a SAVEPOINT and nothing is tried again: a failure rolls the whole
        batch back and raises StoreUnavailable (store writes are idempotent, so the caller
        can run the batch again). Locks taken by its writes are held until it ends.
        """
        if getattr(self._held, "connection", None) is not None:
            yield
            return
        with self._lock:
            connection = self._reconnecting()
            try:
                with connection:
                    self._held.connection = connection
                    try:
                        with _transaction(connection, _BEGIN[self.kind]):
                            yield
                    finally:
                        self._held.connection = None
            except _CommitFailed as failed:
                failure = self._failure(failed.error, committing=True)
                raise failure.translated(self.server, 1, True) from failed.error
            except SQLAlchemyError as error:
                failure = self._failure(error, committing=False)
                raise failure.translated(self.server, 1, True) from error

    def _in_batch(
        self,
        connection: Connection,
        work: Callable[[Connection], T],
        *,
        atomic: bool,
        idempotent: bool,
    ) -> T:
        """Work inside the open batch; atomic work under a savepoint, failures not retried."""
        try:
            if not atomic:
                return work(connection)
            connection.exec_driver_sql("SAVEPOINT imb_atomic")
            try:
                result = work(connection)
            except BaseException:
                connection.exec_driver_sql("ROLLBACK TO SAVEPOINT imb_atomic")
                raise
            connection.exec_driver_sql("RELEASE SAVEPOINT imb_atomic")
            return result
        except SQLAlchemyError as error:
            failure = self._failure(error, committing=False)
            raise failure.translated(self.server, 1, idempotent) from error

    @contextmanager
    def schema_lock(self) -> Iterator[Connection]:
        """A connection holding a lock that serialises schema creation in this namespace."""
        with self._lock, self._reconnecting() as connection:
            if self.kind == "sqlite":
                # BEGIN IMMEDIATE takes SQLite's write lock, which also covers other processes.
                try:
                    with _transaction(connection, _BEGIN["sqlite"]):
                        yield connection
                except _CommitFailed as failed:
                    raise failed.error from None
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
                # Wait less than the read timeout, so that a busy lock is the reported error.
                wait = max(1, math.floor(self.timeouts.statement) - 1)
                got = connection.exec_driver_sql(f"SELECT GET_LOCK({name}, {wait})").scalar()
                if got != 1:
                    raise SchemaLockBusy(f"{self.server}: the schema lock is busy after {wait} s")
                try:
                    yield connection
                finally:
                    connection.exec_driver_sql(f"SELECT RELEASE_LOCK({name})")

    def limits(self) -> StatementLimits:
        """What one statement may carry on this server: asked once, then kept."""
        if self._limits is None:
            self._limits = self.run(lambda connection: ask_limits(self.kind, connection))
        return self._limits

    def server_version(self) -> str:
        """The database server and its version, e.g. "PostgreSQL 15.20"."""
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

    def least(self, left: Any, right: Any) -> ColumnElement[Any]:
        """The smaller of two values (SQLite's two-argument min is its LEAST)."""
        if self.kind == "sqlite":
            return func.min(left, right)
        return func.least(left, right)

    def close(self) -> None:
        """Close every pooled connection (an in-memory SQLite database is gone afterwards)."""
        if self.watchdog is not None:
            self.watchdog.close()
        self.engine.dispose()

    @property
    def _attempt_bound(self) -> float:
        """The longest one attempt can wait (SQLite: only for another writer's lock)."""
        return self.timeouts.statement if self.kind == "sqlite" else self.timeouts.attempt

    def _failure(self, error: SQLAlchemyError, *, committing: bool) -> _Failure:
        """Classify error (see _Failure.of), noting a reply not received in time."""
        ended = self.watchdog.timed_out() if self.watchdog is not None else False
        failure = _Failure.of(error, committing=committing)
        if ended or "timed out" in str(getattr(error, "orig", "")):
            failure.timeout = self.timeouts.statement
        return failure

    def _reconnecting(self) -> Connection:
        """A pooled connection, trying again (up to ATTEMPTS) while none can be opened."""
        started = time.monotonic()
        try:
            return self._connect()
        except _Failure as failure:
            return self._retry(self._connect, failure, started, idempotent=True)

    def _connect(self) -> Connection:
        """A pooled connection; a failure to open one is UNREACHABLE (nothing was sent)."""
        try:
            return self.engine.connect()
        except DBAPIError as error:
            fix = _config_fault(error)
            if fix is not None:
                raise ConfigError(f"{self.server}: {_reason(error)}: {fix}") from None
            raise _Failure(Fault.UNREACHABLE, error) from error
        except PoolTimeout as error:
            # Every pooled connection is busy; another attempt would only wait again.
            raise StoreUnavailable(
                f"{self.server}: no free connection in the pool within {self.timeouts.pool:g} s "
                f"(store.pool_timeout_seconds)"
            ) from error

    def _again(self, failure: _Failure, attempts: int, started: float, idempotent: bool) -> bool:
        """Whether to start another attempt after attempts failed, the last with failure."""
        if not failure.retryable(idempotent):
            return False
        reconnecting = (
            failure.fault is Fault.UNREACHABLE
            and time.monotonic() - started < self.timeouts.reconnect
        )
        if attempts >= self.attempts[failure.fault] and not reconnecting:
            return False
        # Start another attempt only if, at its worst, it still ends within the bound.
        worst = time.monotonic() - started + self._attempt_bound + _WAIT_MAX
        return worst <= self.timeouts.call

    def _warn(self, failure: _Failure, attempt: int) -> None:
        """Log a failed attempt that is tried again (and count contention)."""
        if failure.fault is Fault.CONTENTION:
            contention.record(contention.SQL_RETRY)
        # Deadlocks are routine under concurrent writers; a lost server is news.
        level = logging.DEBUG if failure.fault is Fault.CONTENTION else logging.WARNING
        _log.log(
            level,
            "%s: %s (%s), attempt %d of %d; trying again",
            self.server,
            failure.fault.value,
            failure.reason,
            attempt,
            self.attempts[failure.fault],
        )


class SchemaLockBusy(StoreUnavailable):
    """Another store held the schema lock for longer than a statement may take."""


class _CommitFailed(Exception):
    """COMMIT itself failed: the transaction may or may not have been committed."""

    def __init__(self, error: SQLAlchemyError) -> None:
        super().__init__(str(error))
        self.error = error


class _Failure(Exception):
    """One attempt failed transiently: the driver error and its fault."""

    def __init__(self, fault: Fault, error: SQLAlchemyError) -> None:
        super().__init__(str(error))
        self.fault = fault
        self.error = error
        self.timeout: float | None = None  # set when no reply came within this many seconds

    @property
    def reason(self) -> str:
        """What went wrong, for messages."""
        if self.timeout is not None:
            return f"no reply within {self.timeout:g} s (store.statement_timeout_seconds)"
        return _reason(self.error)

    @classmethod
    def of(cls, error: SQLAlchemyError, *, committing: bool) -> _Failure:
        """Classify an error raised while work ran (committing: its outcome can be unknown).

        Raises the caller's error at once when it is not transient.
        """
        if isinstance(error, DBAPIError):
            if _contention(error):
                return cls(Fault.CONTENTION, error)
            if _mysql_code(error) in _NOT_READY_MYSQL_CODES:
                return cls(Fault.UNREACHABLE, error)
            if error.connection_invalidated:
                return cls(Fault.LOST if committing else Fault.ROLLED_BACK, error)
        raise translate(error) from error

    def retryable(self, idempotent: bool) -> bool:
        """Whether another attempt is safe: every fault but an unknown outcome of other work."""
        return idempotent or self.fault is not Fault.LOST

    def translated(self, server: str, attempts: int, idempotent: bool) -> StoreUnavailable:
        """The caller's error once no attempt is left."""
        reason = self.reason
        if self.fault is Fault.LOST and not idempotent:
            return OutcomeUnknown(
                f"lost the connection to {server} during a write that is not repeated "
                f"automatically; it may or may not have been applied: {reason}"
            )
        if self.fault is Fault.UNREACHABLE:
            return StoreUnavailable(f"{server} is unreachable after {attempts} attempts: {reason}")
        return StoreUnavailable(
            f"{server}: {self.fault.value} on each of {attempts} attempts: {reason}"
        )


def _wait(attempts: int) -> float:
    """Full jitter before attempt attempts + 1: 0 .. 2 ms * 2**(attempts - 1), at most _WAIT_MAX."""
    return random.uniform(0.0, min(_WAIT_BASE * 2 ** (attempts - 1), _WAIT_MAX))


def translate(error: SQLAlchemyError) -> Exception:
    """The domain error for a driver error; the rest of the store's errors are unavailable.

    Bad values are InvalidArgument, configuration faults (a missing schema, no database
    selected) ConfigError, statements too large WriteRefused.
    """
    fix = _config_fault(error)
    if fix is not None:
        return ConfigError(f"{_reason(error)}: {fix}")
    if isinstance(error, DataError):
        return InvalidArgument(f"the database refused a value: {_reason(error)}")
    if _too_large(error):
        return WriteRefused(f"the statement is too large for the database: {_reason(error)}")
    return StoreUnavailable(f"database error: {_reason(error)}")


_MANY_VALUES_PAGE = 100_000


def _create_engine(
    url: str, timeouts: Timeouts, pool: PoolSize | None, asynchronous: bool = False
) -> tuple[Kind, Engine]:
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
    hosts = _hosts(parsed) if kind == "mariadb" else []
    if hosts:
        parsed = parsed.difference_update_query(["host"]).set(host=hosts[0][0], port=hosts[0][1])
    if kind == "mariadb" and not parsed.database:
        raise ConfigError(f"a MariaDB URL needs a database: {_FIX_NO_DATABASE}")
    # One dialect name per engine, so that the mysql_* table options always apply.
    if "+" not in parsed.drivername or backend == "mariadb":
        parsed = parsed.set(drivername=default_driver)
    if asynchronous and parsed.get_driver_name() not in _ASYNC_DRIVER_NAMES:
        parsed = parsed.set(drivername=_ASYNC_DEFAULTS[kind])
    options: dict[str, Any] = {
        "isolation_level": "AUTOCOMMIT",
        "skip_autocommit_rollback": True,
        # The stores read rowcount after INSERT too (to learn whether a row was new).
        "execution_options": {"preserve_rowcount": True},
        # psycopg decodes jsonb itself: with orjson, a pulled slot parses 4-6x faster.
        "json_deserializer": orjson.loads,
        # An executemany INSERT goes as one multi-row statement per chunk the stores cut to
        # the server's limits (adapters/sql/sizing.py), not per 1,000 rows.
        "insertmanyvalues_page_size": _MANY_VALUES_PAGE,
    }
    options.update(_driver_options(kind, timeouts, pool or PoolSize(), asynchronous))
    given = set(parsed.query)  # what the URL sets itself wins
    options["connect_args"] = {k: v for k, v in options["connect_args"].items() if k not in given}
    if kind == "sqlite" and parsed.database in (None, "", ":memory:"):
        options["poolclass"] = StaticPool  # one connection, or every thread sees a new DB
    try:
        engine = _engine(parsed, options, asynchronous)
    except ImportError as error:
        raise missing(error, f"{_NAMES[kind]} ({parsed.drivername}://)") from None
    except (ArgumentError, NoSuchModuleError) as error:
        raise ConfigError(f"cannot use {parsed.drivername}: {error}") from error
    if kind == "sqlite" and options.get("poolclass") is not StaticPool:
        event.listen(engine, "connect", _sqlite_wal)
    if kind == "sqlite" and asynchronous:
        event.listen(engine, "invalidate", _roll_back_before_closing)
    if kind == "mariadb":
        event.listen(engine, "connect", _galera_session)
        event.listen(engine, "handle_error", _drop_unready)
        if asynchronous:
            event.listen(engine, "do_connect", _bounded_handshake(timeouts.connect))
        elif len(hosts) > 1:
            event.listen(engine, "do_connect", _RoundRobin(hosts))
    return kind, engine


def _hosts(url: URL) -> list[tuple[str, int]]:
    """The servers a URL names in its query (``?host=a:3306&host=b``), in order."""
    given = url.query.get("host", ())
    names = [given] if isinstance(given, str) else list(given)
    hosts = []
    for name in names:
        host, _, port = name.rpartition(":") if ":" in name else (name, "", "")
        try:
            hosts.append((host, int(port) if port else 3306))
        except ValueError:
            raise ConfigError(f"not a host:port in store.url: {name!r}") from None
    return hosts


class _RoundRobin:
    """Opens each new connection on the next of several servers, skipping one that refuses.

    A Galera cluster is multi-master: spreading connections over its nodes spreads the load,
    and a dead node costs one refused connect per turn, not the store.
    """

    def __init__(self, hosts: Sequence[tuple[str, int]]) -> None:
        self._hosts = list(hosts)
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        with self._lock:
            first = next(self._turn)
        failure: Exception | None = None
        for offset in range(len(self._hosts)):
            host, port = self._hosts[(first + offset) % len(self._hosts)]
            try:
                return dialect.loaded_dbapi.connect(
                    *cargs, **{**cparams, "host": host, "port": port}
                )
            except dialect.loaded_dbapi.OperationalError as error:
                failure = error
        assert failure is not None
        raise failure


def _galera_session(dbapi_connection: Any, _record: Any) -> None:
    """Causal reads and no server-side retry on a Galera node (see _GALERA_SESSION)."""
    cursor = dbapi_connection.cursor()  # pymysql's and the aiomysql adapter's alike
    try:
        cursor.execute(_GALERA_SESSION)
    except Exception as error:
        if not error.args or error.args[0] != _UNKNOWN_VARIABLE:
            raise
    finally:
        cursor.close()


def _drop_unready(context: Any) -> Exception | None:
    """A Galera node that refuses statements: its connection is discarded, not pooled again.

    So is a connection whose reply the driver could not parse, reported as a lost reply.
    """
    if _mysql_code(context.sqlalchemy_exception) in _NOT_READY_MYSQL_CODES:
        context.is_disconnect = True
    elif context.sqlalchemy_exception is None and _malformed_reply(context.original_exception):
        # A Galera node that aborts a statement for a conflicting replicated write while it
        # sends the statement's RETURNING rows can send a row the driver cannot parse. What
        # the statement did is unknown and the rest of the reply is unread: the connection
        # is dropped and the attempt fails as a lost connection (idempotent work runs again).
        context.is_disconnect = True
        context.invalidate_pool_on_disconnect = False
        lost = context.dialect.loaded_dbapi.OperationalError(
            2013, f"malformed reply from the server: {context.original_exception!r}"
        )
        return OperationalError(
            context.statement, context.parameters, lost, connection_invalidated=True
        )
    return None


def _malformed_reply(error: BaseException) -> bool:
    """Whether error is the driver failing to parse a reply (pymysql's, aiomysql's reader)."""
    if not isinstance(error, ValueError | IndexError | struct.error):
        return False
    trace = error.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_name == "_read_query_result":
            return True
        trace = trace.tb_next
    return False


def _bounded_handshake(seconds: float) -> Callable[..., None]:
    """A do_connect hook bounding aiomysql's whole connect, handshake included, to seconds.

    aiomysql's connect_timeout covers opening the socket only: a server that accepts and then
    stays silent would hold the connect forever.
    """

    def bound(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        import aiomysql
        import pymysql

        async def connect(*args: Any, **kwargs: Any) -> Any:
            try:
                return await asyncio.wait_for(aiomysql.connect(*args, **kwargs), seconds)
            except TimeoutError:
                raise pymysql.err.OperationalError(
                    2013, f"no handshake within {seconds:g} s (store.connect_timeout_seconds)"
                ) from None

        params["async_creator_fn"] = connect

    return bound


def _engine(url: URL, options: dict[str, Any], asynchronous: bool) -> Engine:
    """The engine for url; under asyncio, the synchronous face of an asyncio engine."""
    if not asynchronous:
        return create_engine(url, **options)
    from sqlalchemy.ext.asyncio import create_async_engine

    return create_async_engine(url, **options).sync_engine


def location(url: str) -> tuple[str, ...] | None:
    """Where url keeps its data, equal for two URLs naming one database; None when nowhere.

    None: an in-memory SQLite database (``sqlite://``, ``:memory:``, ``mode=memory``), gone
    when the store is closed. A SQLite file is named by its resolved path; a server database
    by engine, host, port, database and the URL's options (a PostgreSQL search_path).
    """
    try:
        parsed = make_url(url or DEFAULT_URL)
    except ArgumentError as error:
        raise ConfigError(f"not a database URL: {url!r}") from error
    kind = _DRIVERS.get(parsed.get_backend_name(), (parsed.get_backend_name(), ""))[0]
    database = parsed.database or ""
    if kind == "sqlite":
        memory = database in ("", ":memory:") or "mode=memory" in database
        if memory or parsed.query.get("mode") == "memory":
            return None
        path = database.removeprefix("file:").split("?")[0]
        return (kind, str(Path(path).expanduser().resolve()))
    port = parsed.port or {"postgresql": 5432, "mariadb": 3306}.get(kind, 0)
    options = tuple(f"{key}={parsed.query[key]}" for key in sorted(parsed.query))
    return (kind, (parsed.host or "localhost").lower(), str(port), database, *options)


def _driver_options(
    kind: Kind, timeouts: Timeouts, pool: PoolSize, asynchronous: bool = False
) -> dict[str, Any]:
    """Pool and driver settings that bound every wait (URL query options win over these)."""
    if kind == "sqlite":
        # The busy timeout: how long a statement waits for another writer's lock.
        return {"connect_args": {"check_same_thread": False, "timeout": timeouts.statement}}
    options: dict[str, Any] = {
        "pool_size": pool.size,
        "max_overflow": pool.overflow,
        "pool_recycle": 3600,
        "pool_timeout": timeouts.pool,
        "pool_reset_on_return": None,  # autocommit: nothing to roll back on check-in
    }
    # Whole seconds: both drivers round a fraction down, and 0 would mean "no timeout".
    connect = max(1, math.ceil(timeouts.connect))
    if kind == "postgresql":
        options["connect_args"] = {"connect_timeout": connect}
    else:
        options["connect_args"] = {
            "init_command": _MARIADB_SESSION,
            "charset": "utf8mb4",
            "connect_timeout": connect,
        }
        if not asynchronous:  # aiomysql has no socket timeouts: the watchdog bounds a reply
            options["connect_args"]["read_timeout"] = timeouts.statement
            options["connect_args"]["write_timeout"] = timeouts.statement
    return options


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
    cursor = dbapi_connection.cursor()  # sqlite3's and the aiosqlite adapter's alike
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _roll_back_before_closing(dbapi_connection: Any, _record: Any, _error: Any) -> None:
    """End the transaction of an aiosqlite connection that is being discarded (a cut call).

    Closing it is not enough: SQLite keeps a closed connection, with its transaction and so
    the file's write lock, while a cursor of it lives, and the cut statement's cursor is held
    by the exception that cut it (Database._retry frees it once that is gone).
    """
    try:
        dbapi_connection.rollback()
    except Exception:  # already closed or broken: nothing of it is left to end
        return


def _in_transaction(connection: Connection, begin: str, work: Callable[[Connection], T]) -> T:
    with _transaction(connection, begin):
        return work(connection)


@contextmanager
def _transaction(connection: Connection, begin: str) -> Iterator[Connection]:
    """BEGIN … COMMIT; a failure before COMMIT rolls back, a failed COMMIT is _CommitFailed."""
    connection.exec_driver_sql(begin)
    try:
        yield connection
    except BaseException:
        try:
            connection.exec_driver_sql("ROLLBACK")
        except SQLAlchemyError:
            connection.invalidate()  # never hand a connection with an open transaction back
        raise
    try:
        connection.exec_driver_sql("COMMIT")
    except SQLAlchemyError as error:
        raise _CommitFailed(error) from error


def _outcome(result: Any) -> Outcome:
    rows = result.all() if result.returns_rows else []
    return Outcome(rows, result.rowcount)


def _mysql_code(error: BaseException) -> object:
    """MariaDB's error number of a driver error, else None."""
    original = getattr(error, "orig", None)
    return original.args[0] if original is not None and original.args else None


def _contention(error: DBAPIError) -> bool:
    original = error.orig
    if getattr(original, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    code = original.args[0] if original is not None and original.args else None
    if code in _RETRY_MYSQL_CODES:
        return True
    return "database is locked" in str(original)


def _config_fault(error: SQLAlchemyError) -> str | None:
    """The fix for an error that a wrong store.url or server setup causes, else None."""
    original = getattr(error, "orig", None)
    if original is None:
        return None
    fix = _CONFIG_SQLSTATES.get(getattr(original, "sqlstate", None) or "")
    code = original.args[0] if original.args else None
    fix = fix or (_CONFIG_MYSQL_CODES.get(code) if isinstance(code, int) else None)
    if fix is None and type(original).__module__.startswith("psycopg"):
        text = str(original)
        fix = next((fix for sign, fix in _CONFIG_POSTGRES_SIGNS if sign.search(text)), None)
    return fix


def _too_large(error: SQLAlchemyError) -> bool:
    """A statement over the engine's size limits: sending it again fails the same way."""
    original = getattr(error, "orig", None)
    code = original.args[0] if original is not None and original.args else None
    text = str(original if original is not None else error)
    return code in _TOO_LARGE_MYSQL_CODES or any(sign in text for sign in _TOO_LARGE_SIGNS)


def _reason(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    return " ".join(str(original if original is not None else error).split())[:300]
