"""The ``Database`` API: one engine per store, driver errors as domain errors, faults retried.

Connections run in autocommit mode: almost every operation is one statement, which the server
commits by itself, so no BEGIN/COMMIT round trips are spent. The few operations that need
several statements in one transaction ask for it (``atomic=True``) and get an explicit
BEGIN ... COMMIT on one connection.

Engines are built in ``imbucket.adapters.sql.dialects``; what a failure means and how often it
is tried again is ``imbucket.adapters.sql.faults``. Retried attempts are logged here.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Connection, Executable, Table, func
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.sql.dml import Insert

from imbucket.adapters import asyncio_bridge, contention
from imbucket.adapters.sql import prepared
from imbucket.adapters.sql.dialects import (
    BEGIN,
    DEFAULT_URL,
    NAMES,
    build_engine,
    check_mariadb,
    hosts_of,
)
from imbucket.adapters.sql.faults import (
    ATTEMPTS,
    MULTI_MASTER_CONTENTION_ATTEMPTS,
    WAIT_MAX,
    CommitFailed,
    Failure,
    Fault,
    backoff,
    config_fault,
    describe,
)
from imbucket.adapters.sql.prepared import Prepared
from imbucket.adapters.sql.sizing import StatementLimits, ask_limits
from imbucket.adapters.sql.watchdog import Watchdog
from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.domain.errors import ConfigError, StoreUnavailable

T = TypeVar("T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one statement returned: its rows (if any) and its row count."""

    rows: Sequence[Any]
    rowcount: int


class Database:
    """An engine for one URL plus the few SQL spellings that differ between engines.

    SQLite is serialised by a lock (an in-memory database is a single shared connection);
    the servers run statements from many threads on pooled connections.

    asynchronous: the engine is the ``sync_engine`` of an asyncio engine, and every call must
    run in a greenlet (``imbucket.aio``); the statements, retries and bounds are the same.
    """

    def __init__(
        self,
        url: str,
        timeouts: Timeouts | None = None,
        pool: PoolSize | None = None,
        *,
        asynchronous: bool = False,
    ) -> None:
        self.timeouts = timeouts or Timeouts()
        self.asynchronous = asynchronous
        self.kind, self.engine = build_engine(url or DEFAULT_URL, self.timeouts, pool, asynchronous)
        self._cursors_hold_locks = self.kind == "sqlite" and asynchronous
        self._given = make_url(url or DEFAULT_URL)
        self.attempts = dict(ATTEMPTS)  # per fault, the first attempt included
        if self.kind == "mariadb" and len(hosts_of(self._given)) > 1:
            self.attempts[Fault.CONTENTION] = MULTI_MASTER_CONTENTION_ATTEMPTS
        self._lock: AbstractContextManager[Any] = nullcontext()
        if self.kind == "sqlite":
            self._lock = asyncio_bridge.GreenletLock() if asynchronous else threading.RLock()
        self._limits: StatementLimits | None = None
        # The connection of this thread's open batch, if any (a batch of imbucket.aio spans
        # the greenlets of the calls made inside it), and of this caller's joined work: per
        # greenlet under asyncio, since the concurrent calls of an event loop share a thread.
        self._batch = threading.local()
        self._joined = asyncio_bridge.TaskLocal()
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
            return f"{NAMES[self.kind]} at {given if isinstance(given, str) else ','.join(given)}"
        return f"{NAMES[self.kind]} at {url.host}:{url.port or ''}".rstrip(":")

    @property
    def in_batch(self) -> bool:
        """Whether this thread's statements run inside an open ``batch``."""
        return getattr(self._batch, "held", None) is not None

    def _holding(self) -> _Held | None:
        """The connection this caller's statements must run on: its joined work's, or batch's."""
        joined: _Held | None = self._joined.get()
        return joined if joined is not None else getattr(self._batch, "held", None)

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

    def fetch_raw(
        self, statement: Executable, params: Mapping[str, Any] | None = None
    ) -> Sequence[Any]:
        """The rows of a read as the driver returns them: tuples, no type conversion.

        For bulk reads whose caller converts the values itself (SQLite's booleans are 0/1
        here); spares building a SQLAlchemy row per row. Otherwise as ``execute``.
        """
        return self.run(lambda c: _driver_rows(c.execute(statement, params)))

    def fetch(
        self, statement: Prepared, params: Mapping[str, Any], *, idempotent: bool = True
    ) -> list[Any]:
        """The driver's rows of a prepared statement (``imbucket.adapters.sql.prepared``).

        Run as ``execute`` runs one statement (same events, retries and error translation);
        the rows are the driver's own, without SQLAlchemy's result types.
        """
        bound = statement.params(params)
        return self.run(
            lambda c: list(on_cursor(c, statement.sql, bound).rows), idempotent=idempotent
        )

    def write(
        self, statement: Prepared, params: Mapping[str, Any], *, idempotent: bool = True
    ) -> Outcome:
        """``fetch``, with the row count of a write."""
        bound = statement.params(params)
        return self.run(lambda c: on_cursor(c, statement.sql, bound), idempotent=idempotent)

    def run(
        self,
        work: Callable[[Connection], T],
        *,
        atomic: bool = False,
        idempotent: bool = True,
        joined: bool = False,
        savepoint: bool = True,
    ) -> T:
        """Run work on one connection; atomic wraps it in a transaction.

        Inside a batch (``batch``), atomic work runs under a SAVEPOINT of its own, so that its
        failure undoes it alone; with savepoint False it runs without one (two round trips
        fewer), for work whose failure fails the batch anyway: the batch is then rolled back
        whole.

        joined (with atomic): every statement this thread issues while work runs, through
        this Database (a store's own calls included), joins work's transaction; atomic work
        among them runs under a SAVEPOINT. A fault in any of them ends the transaction, and
        the whole work is what is tried again.

        Transient faults are tried again up to ATTEMPTS times. Work is idempotent when running
        it twice leaves the same stored state as running it once (every statement of the
        stores but seq allocation): only such work is repeated after a connection was lost
        with its outcome unknown; other work then raises OutcomeUnknown.

        The first attempt runs without any retry machinery (the fast path of every read);
        only a failed attempt enters the retry loop.
        """
        held = self._holding()
        if held is not None:
            alone = atomic and savepoint
            return self._in_batch(held, work, atomic=alone, idempotent=idempotent)
        if joined:
            work = self._joining(work)
        started = time.monotonic()
        try:
            return self._attempt(work, atomic)
        except Failure as failure:
            return self._retry(lambda: self._attempt(work, atomic), failure, started, idempotent)

    def _joining(self, work: Callable[[Connection], T]) -> Callable[[Connection], T]:
        """work, with this thread's statements joining its connection while it runs."""

        def joined(connection: Connection) -> T:
            self._joined.set(_Held(connection, joined=True))
            try:
                return work(connection)
            finally:
                self._joined.set(None)

        return joined

    def _attempt(self, work: Callable[[Connection], T], atomic: bool) -> T:
        """One attempt of work; a transient failure is raised as Failure."""
        with self._lock:
            connection = self._connect()
            try:
                with connection:
                    if not atomic:
                        return work(connection)
                    return _in_transaction(connection, BEGIN[self.kind], work)
            except CommitFailed as failed:
                raise self._failure(failed.error, committing=True) from failed.error
            except SQLAlchemyError as error:
                raise self._failure(error, committing=not atomic) from error

    def _retry(
        self, attempt: Callable[[], T], failure: Failure, started: float, idempotent: bool
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
            asyncio_bridge.pause(backoff(attempts))
            attempts += 1
            try:
                return attempt()
            except Failure as again:
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
        if self._holding() is not None:
            yield
            return
        with self._lock:
            connection = self._reconnecting()
            try:
                with connection:
                    self._batch.held = _Held(connection, joined=False)
                    try:
                        with _transaction(connection, BEGIN[self.kind]):
                            yield
                    finally:
                        self._batch.held = None
            except CommitFailed as failed:
                failure = self._failure(failed.error, committing=True)
                raise failure.translated(self.server, 1, True) from failed.error
            except SQLAlchemyError as error:
                failure = self._failure(error, committing=False)
                raise failure.translated(self.server, 1, True) from error

    def _in_batch(
        self,
        held: _Held,
        work: Callable[[Connection], T],
        *,
        atomic: bool,
        idempotent: bool,
    ) -> T:
        """Work inside the open batch; atomic work under a savepoint, failures not retried.

        Inside joined work (see run) a failure is left to that work's attempt to classify.
        """
        connection = held.connection
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
            if held.joined:
                raise
            failure = self._failure(error, committing=False)
            raise failure.translated(self.server, 1, idempotent) from error

    @contextmanager
    def schema_lock(self) -> Iterator[Connection]:
        """A connection holding a lock that serialises schema creation in this namespace."""
        with self._lock, self._reconnecting() as connection:
            if self.kind == "sqlite":
                # BEGIN IMMEDIATE takes SQLite's write lock, which also covers other processes.
                try:
                    with _transaction(connection, BEGIN["sqlite"]):
                        yield connection
                except CommitFailed as failed:
                    raise failed.error from None
            elif self.kind == "postgresql":
                key = "hashtext(current_schema() || ':imbucket')"
                connection.exec_driver_sql(f"SELECT pg_advisory_lock({key})")
                try:
                    yield connection
                finally:
                    connection.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            else:
                check_mariadb(connection)
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
        return f"{NAMES[self.kind]} {'.'.join(str(part) for part in version)}".strip()

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

    def _failure(self, error: SQLAlchemyError, *, committing: bool) -> Failure:
        """Classify error (see Failure.of), noting a reply not received in time."""
        ended = self.watchdog.timed_out() if self.watchdog is not None else False
        failure = Failure.of(error, committing=committing)
        if ended or "timed out" in str(getattr(error, "orig", "")):
            failure.timeout = self.timeouts.statement
        return failure

    def _reconnecting(self) -> Connection:
        """A pooled connection, trying again (up to ATTEMPTS) while none can be opened."""
        started = time.monotonic()
        try:
            return self._connect()
        except Failure as failure:
            return self._retry(self._connect, failure, started, idempotent=True)

    def _connect(self) -> Connection:
        """A pooled connection; a failure to open one is UNREACHABLE (nothing was sent)."""
        try:
            return self.engine.connect()
        except DBAPIError as error:
            fix = config_fault(error)
            if fix is not None:
                raise ConfigError(f"{self.server}: {describe(error)}: {fix}") from None
            raise Failure(Fault.UNREACHABLE, error) from error
        except PoolTimeout as error:
            # Every pooled connection is busy; another attempt would only wait again.
            raise StoreUnavailable(
                f"{self.server}: no free connection in the pool within {self.timeouts.pool:g} s "
                f"(store.pool_timeout_seconds)"
            ) from error

    def _again(self, failure: Failure, attempts: int, started: float, idempotent: bool) -> bool:
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
        worst = time.monotonic() - started + self._attempt_bound + WAIT_MAX
        return worst <= self.timeouts.call

    def _warn(self, failure: Failure, attempt: int) -> None:
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


@dataclass(frozen=True, slots=True)
class _Held:
    """The connection a caller's statements run on: its open batch's, or its joined work's."""

    connection: Connection
    joined: bool


class SchemaLockBusy(StoreUnavailable):
    """Another store held the schema lock for longer than a statement may take."""


def _in_transaction(connection: Connection, begin: str, work: Callable[[Connection], T]) -> T:
    with _transaction(connection, begin):
        return work(connection)


@contextmanager
def _transaction(connection: Connection, begin: str) -> Iterator[Connection]:
    """BEGIN … COMMIT; a failure before COMMIT rolls back, a failed COMMIT is CommitFailed."""
    # BEGIN and COMMIT at the cursor level, as a prepared statement runs (events included).
    on_cursor(connection, begin, ())
    try:
        yield connection
    except BaseException:
        try:
            connection.exec_driver_sql("ROLLBACK")
        except SQLAlchemyError:
            connection.invalidate()  # never hand a connection with an open transaction back
        raise
    try:
        on_cursor(connection, "COMMIT", ())
    except SQLAlchemyError as error:
        raise CommitFailed(error) from error


def on_cursor(connection: Connection, sql: str, params: Any) -> Outcome:
    """Run sql on a cursor of connection; its rows (fetched) and row count.

    The cursor-level execution: the statement's events and error handling, without an
    execution context or result object per call (``imbucket.adapters.sql.prepared``).
    """
    cursor = connection.connection.cursor()
    try:
        connection._cursor_execute(cursor, sql, params)
        try:
            rows = prepared.fetch_all(cursor) if cursor.description is not None else []
        except BaseException as error:  # translated as SQLAlchemy's result fetching does
            connection._handle_dbapi_exception(error, sql, params, cursor, None)
        outcome = Outcome(rows, cursor.rowcount)
    except BaseException:
        # A failed statement may have ended the connection (a cancelled call on asyncio):
        # closing its cursor then must not hide the error.
        with suppress(Exception):
            cursor.close()
        raise
    cursor.close()
    return outcome


def _driver_rows(result: Any) -> Sequence[Any]:
    try:
        rows: Sequence[Any] = result.cursor.fetchall()
    finally:
        result.close()
    return rows


def _outcome(result: Any) -> Outcome:
    rows = result.all() if result.returns_rows else []
    return Outcome(rows, result.rowcount)
