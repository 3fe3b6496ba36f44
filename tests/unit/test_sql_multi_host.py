"""Several servers behind one store: a Galera node that refuses statements, a URL naming
several MariaDB nodes, and reconnecting while a PostgreSQL primary fails over.

The real clusters are in tests/distributed/; here the failures are raised by hand.
"""

from __future__ import annotations

import socket
from typing import Any

import pymysql
import pytest
from sqlalchemy import event, make_url, select
from sqlalchemy.exc import OperationalError

from imbucket.adapters.sql.dialects import RoundRobin
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.faults import ATTEMPTS, Fault
from imbucket.adapters.sql.faults import MULTI_MASTER_CONTENTION_ATTEMPTS as MULTI_MASTER
from imbucket.adapters.timeouts import Timeouts
from imbucket.app import open_service
from imbucket.bench.instrument.scratch import server_version
from imbucket.domain.errors import ConfigError, StoreUnavailable
from tests.sql_servers import mariadb_server
from tests.unit.flaky_work import Flaky


def not_ready() -> OperationalError:
    """What a Galera node outside the primary component answers to any statement."""
    orig = pymysql.err.OperationalError(1047, "WSREP has not yet prepared node for application use")
    return OperationalError("INSERT", None, orig)


def test_a_statement_a_galera_node_refused_unrun_is_tried_again_even_when_not_idempotent(
    db: Database,
) -> None:
    work = Flaky(not_ready(), failures=ATTEMPTS[Fault.UNREACHABLE] - 1)
    assert db.run(work, idempotent=False) == "done"
    assert work.runs == ATTEMPTS[Fault.UNREACHABLE]


def test_a_galera_node_that_keeps_refusing_gives_store_unavailable(db: Database) -> None:
    work = Flaky(not_ready(), failures=100)
    with pytest.raises(StoreUnavailable, match="WSREP has not yet prepared node"):
        db.run(work, idempotent=False)
    assert work.runs == ATTEMPTS[Fault.UNREACHABLE]


class FakeDriver:
    """A DBAPI module whose connect succeeds only for the ports in up, recording each try."""

    OperationalError = pymysql.err.OperationalError

    def __init__(self, up: set[int]) -> None:
        self.up = up
        self.tried: list[int] = []

    def connect(self, *_args: Any, **params: Any) -> str:
        self.tried.append(params["port"])
        if params["port"] not in self.up:
            raise pymysql.err.OperationalError(2003, "Can't connect")
        return f"connection to {params['port']}"


class FakeDialect:
    def __init__(self, driver: FakeDriver) -> None:
        self.loaded_dbapi = driver


def test_each_new_connection_goes_to_the_next_node() -> None:
    driver = FakeDriver(up={1, 2, 3})
    connect = RoundRobin([("h", 1), ("h", 2), ("h", 3)])
    got = [connect(FakeDialect(driver), None, (), {"host": "x"}) for _ in range(4)]
    assert got == [f"connection to {port}" for port in (1, 2, 3, 1)]


def test_a_node_that_refuses_is_skipped_and_only_all_refusing_fails() -> None:
    driver = FakeDriver(up={3})
    connect = RoundRobin([("h", 1), ("h", 2), ("h", 3)])
    assert connect(FakeDialect(driver), None, (), {}) == "connection to 3"
    assert driver.tried == [1, 2, 3]
    driver.up.clear()
    with pytest.raises(pymysql.err.OperationalError):
        connect(FakeDialect(driver), None, (), {})


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return int(listener.getsockname()[1])


def test_a_mariadb_url_naming_several_dead_nodes_names_them_all_when_unreachable() -> None:
    ports = [closed_port(), closed_port()]
    hosts = "&".join(f"host=127.0.0.1:{port}" for port in ports)
    database = Database(f"mysql+pymysql://root@/test?{hosts}")
    try:
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"):
            database.execute(select(1))
    finally:
        database.close()


def test_a_host_without_a_port_number_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not a host:port"):
        Database("mysql+pymysql://root@/test?host=a:b&host=c:3306")


def test_a_reconnect_bound_keeps_trying_to_connect_past_the_usual_attempts() -> None:
    database = Database(
        f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/test",
        Timeouts(reconnect=0.5),
    )
    connects: list[object] = []
    event.listen(database.engine, "do_connect", lambda *args: connects.append(args))
    try:
        with pytest.raises(StoreUnavailable, match="unreachable"):
            database.execute(select(1))
    finally:
        database.close()
    assert len(connects) > ATTEMPTS[Fault.UNREACHABLE]


def test_the_reconnect_setting_reaches_the_store() -> None:
    config = {"store": {"backend": "sql-row", "reconnect_timeout_seconds": 7.5}}
    service = open_service(config)
    try:
        assert service.store.db.timeouts.reconnect == 7.5  # type: ignore[attr-defined]
    finally:
        service.close()


def test_a_negative_reconnect_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="reconnect"):
        Timeouts(reconnect=-1)


def test_writers_on_several_galera_nodes_get_more_tries_at_a_hot_row() -> None:
    several = Database("mysql+pymysql://root@/test?host=127.0.0.1:1&host=127.0.0.1:2")
    one = Database("mysql+pymysql://root@127.0.0.1:1/test")
    try:
        assert several.attempts[Fault.CONTENTION] == MULTI_MASTER
        assert one.attempts == ATTEMPTS
    finally:
        several.close()
        one.close()


def test_a_table_busy_with_another_nodes_ddl_is_tried_again(db: Database) -> None:
    orig = pymysql.err.OperationalError(1684, "skipped since its definition is being modified")
    work = Flaky(OperationalError("SELECT", None, orig), failures=2)
    assert db.run(work, idempotent=False) == "done"
    assert work.runs == 3


def test_the_benchmark_names_the_engine_of_a_url_naming_several_nodes() -> None:
    single = make_url(mariadb_server())
    hosts = [f"{single.host}:{single.port or 3306}", f"127.0.0.1:{closed_port()}"]
    url = single.set(host=None, port=None).update_query_pairs([("host", h) for h in hosts])
    version = server_version(url.render_as_string(hide_password=False))
    assert version == server_version(mariadb_server())
    assert version.startswith("MariaDB ")
