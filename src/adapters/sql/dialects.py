"""Engine construction per SQL dialect: drivers, bounds on every wait, each session's settings.

Connections run in autocommit mode (see ``imbucket.adapters.sql.engine``). A MariaDB URL may
name several servers (``?host=a:3306&host=b:3306``, the nodes of a Galera cluster): each new
connection goes to the next one that answers. A PostgreSQL URL may too, as libpq reads it
(``target_session_attrs=read-write`` finds the primary).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import StaticPool

from imbucket.adapters.extras import missing
from imbucket.adapters.sql.faults import FIX_NO_DATABASE, NOT_READY_MYSQL_CODES, mysql_code
from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.domain.errors import ConfigError

Kind = Literal["sqlite", "postgresql", "mariadb"]

DEFAULT_URL = "sqlite://"
_DRIVERS: dict[str, tuple[Kind, str]] = {
    "sqlite": ("sqlite", "sqlite"),
    "postgresql": ("postgresql", "postgresql+psycopg"),
    "mysql": ("mariadb", "mysql+pymysql"),
    "mariadb": ("mariadb", "mysql+pymysql"),
}
# For an asynchronous Database (imbucket.aio): the asyncio driver for each engine, unless the
# URL names another asyncio driver itself.
_ASYNC_DEFAULTS: dict[Kind, str] = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+psycopg",
    "mariadb": "mysql+aiomysql",
}
_ASYNC_DRIVER_NAMES = frozenset({"aiosqlite", "psycopg", "psycopg_async", "asyncpg", "aiomysql"})
NAMES: dict[Kind, str] = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}
BEGIN: dict[Kind, str] = {
    "sqlite": "BEGIN IMMEDIATE",
    "postgresql": "BEGIN",
    "mariadb": "START TRANSACTION",
}
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

_MANY_VALUES_PAGE = 100_000


def build_engine(
    url: str, timeouts: Timeouts, pool: PoolSize | None, asynchronous: bool = False
) -> tuple[Kind, Engine]:
    """The dialect url names and its engine, bounded by timeouts and pool.

    Raises ConfigError for a URL no SQL store takes, or a driver that is not installed.
    """
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
    hosts = hosts_of(parsed) if kind == "mariadb" else []
    if hosts:
        parsed = parsed.difference_update_query(["host"]).set(host=hosts[0][0], port=hosts[0][1])
    if kind == "mariadb" and not parsed.database:
        raise ConfigError(f"a MariaDB URL needs a database: {FIX_NO_DATABASE}")
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
        raise missing(error, f"{NAMES[kind]} ({parsed.drivername}://)") from None
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
            event.listen(engine, "do_connect", RoundRobin(hosts))
    return kind, engine


def hosts_of(url: URL) -> list[tuple[str, int]]:
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


class RoundRobin:
    """Opens each new connection on the next of several servers, skipping one that refuses.

    A Galera cluster is multi-master: spreading connections over its nodes spreads the load,
    and a dead node costs one refused connect per turn, not the store.
    """

    def __init__(self, hosts: Sequence[tuple[str, int]]) -> None:
        self._hosts = list(hosts)
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        """A do_connect hook: the DBAPI connection to the first server of this turn that answers."""
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
    if mysql_code(context.sqlalchemy_exception) in NOT_READY_MYSQL_CODES:
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


def check_mariadb(connection: Connection) -> None:
    """Raise ConfigError unless the server is MariaDB 10.5 or later (INSERT … RETURNING)."""
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
