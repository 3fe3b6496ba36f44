"""A writer whose store connection is broken at every few statements, while others go on.

Guarantee: whatever statement of a call loses its connection, before it runs (the session
killed on the server) or after (the reply lost: committed, or rolled back with its
transaction), the call is retried or fails with StoreUnavailable, and the history stays one
the reference model gives: acknowledged writes are visible to every later pull, a send of
unknown outcome and its retry store one message or none. No cache: every pull reads the
store, so no staleness is allowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.faults import ATTEMPTS, Fault
from imbucket.testing.histories import run_threads
from tests.faults.conftest import KILL, LOSE_REPLY, Faults
from tests.histories.rig import Config, config, finish, run, workload
from tests.proxy import TcpProxy
from tests.sql_servers import postgres_schema, postgres_server

pytestmark = pytest.mark.histories
# Every PERIOD-th statement of the writer is broken: a period that no call's statement count
# divides, so that over the run every statement of every kind of call is hit.
PERIOD = 7


# Every BURST-th break also breaks the next statements, until the engine gives the call up.
BURST = 4
GIVE_UP = ATTEMPTS[Fault.LOST]


class EveryFew(Faults):
    """Faults that break every PERIOD-th statement while armed, KILL and LOSE_REPLY in turn;
    every BURST-th break lasts for GIVE_UP statements: the call fails, its outcome unknown.
    """

    _burst = 0

    def _seen(self, connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        self.statements.append(statement)
        if self._burst:
            self._burst -= 1
        elif len(self.statements) % PERIOD:
            return
        elif len(self.fired) % BURST == BURST - 1:
            self._burst = GIVE_UP - 1
        self.fired.append(len(self.statements))
        if len(self.fired) % 2:
            self._kill(connection.connection.dbapi_connection)
        else:
            self.proxy.lose_next_reply()


@pytest.fixture
def store() -> Iterator[tuple[str, Config]]:
    """The PostgreSQL server and an uncached sql-bucket store on a schema of its own."""
    server = postgres_server()
    with postgres_schema(server) as url:
        yield server, config({"backend": "sql-bucket", "url": url})


def test_a_writer_whose_store_connection_breaks_at_every_few_statements(
    store: tuple[str, Config],
) -> None:
    server, settings = store
    work = workload(seed=5)
    with run() as history:
        proxy = TcpProxy(settings["store"]["url"], 5432)
        history.stack.callback(proxy.close)
        admin = Database(server)
        history.stack.callback(admin.close)
        readers = [history.client(f"reader-{i}", settings, writer=False) for i in (1, 2)]
        writer = history.client("writer", settings, writer=True)
        cut = config({"backend": "sql-bucket", "url": proxy.url})
        broken = history.client("writer-broken", cut, writer=True)
        faults = EveryFew(broken.service.store.engine, admin, proxy)  # type: ignore[attr-defined]
        with faults.armed(KILL, times=None):
            run_threads([broken, writer, *readers], work, history.recorder)
        fault = (
            f"writer-broken's connection broken at every {PERIOD}th statement "
            f"({len(faults.fired)} of {len(faults.statements)}: {KILL} and {LOSE_REPLY} in turn; "
            f"every {BURST}th for {GIVE_UP} statements in a row)"
        )
        finish(history, work, settings, fault)
