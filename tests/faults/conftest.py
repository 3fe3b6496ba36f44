"""Fault injection on the real PostgreSQL and MariaDB: a store whose connection a test breaks.

Every store reaches its server through a TcpProxy of the test's own, in a schema or database
of its own. A ``before_cursor_execute`` hook picks the statement to break, deterministically:

- KILL: before the statement is sent, a second connection ends the store's session on the
  server (``pg_terminate_backend(pid)``, MariaDB's ``KILL CONNECTION id``) and the hook waits
  until the proxy sees the server close that connection, so the statement never runs;
- LOSE_REPLY: the statement reaches the server and runs; the proxy drops the connection when
  the reply arrives, so the client never learns the outcome (for an autocommitted statement or
  a COMMIT: committed).

Only sessions of this test are ever killed; the shared servers keep running.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from imbucket.adapters.sql.engine import Database
from imbucket.app import MessageService, open_service
from imbucket.testing.rows import store_config
from tests.faults.scenario import BUCKET_SIZE
from tests.proxy import TcpProxy
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

KILL = "kill"
LOSE_REPLY = "lose-reply"
MODES = (KILL, LOSE_REPLY)

_ENGINES: dict[str, tuple[Callable[[], str], Callable[[str], Any], int]] = {
    "postgres": (postgres_server, postgres_schema, 5432),
    "mariadb": (mariadb_server, mariadb_database, 3306),
}
STORES = [
    pytest.param(("sql-row", "postgres"), id="sql-row-postgres"),
    pytest.param(("sql-row", "mariadb"), id="sql-row-mariadb"),
    pytest.param(("sql-bucket", "postgres"), id="sql-bucket-postgres"),
    pytest.param(("sql-bucket", "mariadb"), id="sql-bucket-mariadb"),
]
ENGINES = [STORES[0], STORES[1]]  # the seq store is the same for both layouts


class Faults:
    """Breaks the connection of an engine's statements while armed (see the module docstring).

    ``statements`` lists every statement sent while armed and ``fired`` the 1-based numbers of
    those that were broken.
    """

    def __init__(self, engine: Engine, admin: Database, proxy: TcpProxy) -> None:
        self.engine = engine
        self.admin = admin
        self.proxy = proxy
        self.statements: list[str] = []
        self.fired: list[int] = []
        self._mode = KILL
        self._due: Callable[[int, str], bool] = lambda number, statement: False
        self._times: int | None = 1

    @contextmanager
    def armed(
        self, mode: str, at: int = 1, match: str | None = None, times: int | None = 1
    ) -> Iterator[Faults]:
        """Break statement number at (or the first whose SQL matches) and the next times - 1.

        times=None breaks every statement from there on: the server seems gone for good.
        """
        pattern = re.compile(match) if match else None

        def due(number: int, statement: str) -> bool:
            if pattern is None:
                return number >= at
            return bool(self.fired) or pattern.search(statement) is not None

        self.statements, self.fired = [], []
        self._mode, self._due, self._times = mode, due, times
        event.listen(self.engine, "before_cursor_execute", self._seen)
        try:
            yield self
        finally:
            event.remove(self.engine, "before_cursor_execute", self._seen)

    def sent(self, pattern: str) -> int:
        """How many statements sent while armed match pattern (a retried one counts twice)."""
        return sum(1 for statement in self.statements if re.search(pattern, statement))

    def _seen(self, connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        self.statements.append(statement)
        number = len(self.statements)
        if not self._due(number, statement):
            return
        if self._times is not None and len(self.fired) >= self._times:
            return
        self.fired.append(number)
        if self._mode == LOSE_REPLY:
            self.proxy.lose_next_reply()
        else:
            self._kill(connection.connection.dbapi_connection)

    def _kill(self, dbapi_connection: Any) -> None:
        """End the session on the server, and wait until its socket is closed."""
        if self.admin.kind == "postgresql":
            pid = int(dbapi_connection.info.backend_pid)
            ended = self.admin.execute(text(f"SELECT pg_terminate_backend({pid})"))
            assert ended.rows[0][0] is True, f"backend {pid} is not there"
            port = _local_port(socket.socket(fileno=os.dup(dbapi_connection.pgconn.socket)))
        else:
            thread = int(dbapi_connection.thread_id())
            self.admin.run(lambda c: c.exec_driver_sql(f"KILL CONNECTION {thread}"))
            port = dbapi_connection._sock.getsockname()[1]
        self.proxy.wait_ended(port)


def _local_port(sock: socket.socket) -> int:
    with sock:
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Rig:
    """A service on a real engine behind a proxy, and the faults that break its connection."""

    service: MessageService
    faults: Faults
    proxy: TcpProxy
    engine: str  # "postgres" or "mariadb"
    backend: str  # "sql-row" or "sql-bucket"


@pytest.fixture
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    """One of STORES (parametrize indirectly), in a namespace of its own."""
    backend, engine = request.param
    find_server, namespace, port = _ENGINES[engine]
    server = find_server()
    with namespace(server) as url:
        proxy = TcpProxy(url, port)
        admin = Database(server)
        config = store_config(backend, proxy.url)
        config["store"]["bucket_size"] = BUCKET_SIZE
        service = open_service(config)
        try:
            faults = Faults(service.store.engine, admin, proxy)  # type: ignore[attr-defined]
            yield Rig(service, faults, proxy, engine, backend)
        finally:
            service.close()
            admin.close()
            proxy.close()
