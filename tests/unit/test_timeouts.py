"""Every wait of a store or cache call is bounded, by settings that reach the drivers.

The black-hole tests on real servers are in tests/faults/test_black_hole.py; here: the
arithmetic of the defaults, the options each driver is given, and the waits that need no
remote server (SQLite's busy timeout, a closed port, a full pool on the local PostgreSQL).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select

from imbucket.adapters.mongo.connection import MongoConnection
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.faults import ATTEMPTS, WAIT_MAX, Fault
from imbucket.adapters.timeouts import CALL_BOUND_SECONDS, Timeouts
from imbucket.app import open_service
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Draft
from tests.sql_servers import postgres_server
from tests.unit.test_sql_retry import SERVERS, closed_port
from tests.waits import returned


def test_the_default_waits_fit_in_30_seconds_with_every_retry() -> None:
    # By construction: every attempt of a connection fault may wait for a pooled connection,
    # a new connection and one reply, plus the jittered pause before each further attempt.
    bounds = Timeouts()
    attempts = ATTEMPTS[Fault.UNREACHABLE]
    assert attempts == ATTEMPTS[Fault.LOST] == ATTEMPTS[Fault.ROLLED_BACK] == 3
    assert attempts * bounds.attempt + (attempts - 1) * WAIT_MAX <= CALL_BOUND_SECONDS
    assert bounds.call == CALL_BOUND_SECONDS


def test_the_settings_reach_the_store() -> None:
    service = open_service({"store": {"backend": "sql-row"}})
    try:
        assert service.seqs.db.timeouts == Timeouts()  # type: ignore[attr-defined]
    finally:
        service.close()
    store = {"backend": "sql-bucket", "connect_timeout_seconds": 4}
    store.update(statement_timeout_seconds=0.5, pool_timeout_seconds=7)
    service = open_service({"store": store})
    try:
        assert service.seqs.db.timeouts == Timeouts(4, 0.5, 7)  # type: ignore[attr-defined]
    finally:
        service.close()


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="statement"):
        Timeouts(statement=0)


@pytest.fixture(params=SERVERS.values(), ids=SERVERS.keys())
def driver_args(request: pytest.FixtureRequest) -> Callable[[str], dict[str, Any]]:
    """The keyword arguments a Database on a closed port hands its driver, for a URL query."""

    def connect_with(query: str) -> dict[str, Any]:
        url = request.param[0].format(port=closed_port()) + query
        database = Database(url, Timeouts(connect=3, statement=4, pool=1))
        seen: list[dict[str, Any]] = []
        event.listen(database.engine, "do_connect", lambda d, r, a, params: seen.append(params))
        try:
            with pytest.raises(StoreUnavailable):
                database.execute(select(1))
        finally:
            database.close()
        return seen[0]

    return connect_with


def test_the_drivers_get_the_timeouts_and_the_url_wins(
    driver_args: Callable[[str], dict[str, Any]],
) -> None:
    given = driver_args("")
    assert given["connect_timeout"] == 3
    if "init_command" in given:  # MariaDB: PyMySQL bounds its reads and writes itself
        assert given["read_timeout"] == given["write_timeout"] == 4
    assert int(driver_args("?connect_timeout=9")["connect_timeout"]) == 9


def test_no_attempt_starts_that_could_end_past_the_call_bound() -> None:
    # One attempt may take 40 s here: a second one could not end within the bound.
    url = SERVERS["postgres"][0].format(port=closed_port())
    database = Database(url, Timeouts(statement=40))
    connects: list[object] = []
    event.listen(database.engine, "do_connect", lambda *args: connects.append(args))
    try:
        with pytest.raises(StoreUnavailable, match="unreachable after 1 attempts"):
            database.execute(select(1))
    finally:
        database.close()
    assert len(connects) == 1


def test_sqlite_waits_for_another_writer_only_as_long_as_the_statement_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    store = {"backend": "sql-row", "url": f"sqlite:///{path}", "statement_timeout_seconds": 0.2}
    service = open_service({"store": store})
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        draft = Draft(send_id="alice", content="hi", client_msg_id="c-1", recv_id="bob")
        error = returned(lambda: service.send("si_alice_bob", [draft]))
        assert isinstance(error, StoreUnavailable)
        assert "deadlock or lock timeout" in str(error)
        blocker.execute("ROLLBACK")
        [sent] = service.send("si_alice_bob", [draft])  # works again once the lock is gone
        assert sent.seq == 1
    finally:
        blocker.close()
        service.close()


@pytest.fixture
def small_pool() -> Iterator[Database]:
    database = Database(postgres_server(), Timeouts(pool=0.2))
    yield database
    database.close()


def test_a_full_pool_gives_store_unavailable_after_the_pool_timeout(small_pool: Database) -> None:
    held = [small_pool.engine.connect() for _ in range(30)]  # pool_size 10 + max_overflow 20
    try:
        error = returned(lambda: small_pool.execute(select(1)))
        assert isinstance(error, StoreUnavailable)
        assert "no free connection in the pool within 0.2 s" in str(error)
    finally:
        for connection in held:
            connection.close()
    assert small_pool.execute(select(1)).rows == [(1,)]


def test_mongo_client_waits_are_the_settings() -> None:
    connection = MongoConnection("mongodb://127.0.0.1:1/chat", timeouts=Timeouts(1, 0.5, 2))
    try:
        options = connection.client.options
        assert options.server_selection_timeout == 1
        assert options.pool_options.connect_timeout == 1
        assert options.pool_options.socket_timeout == 0.5
        assert options.pool_options.wait_queue_timeout == 2
    finally:
        connection.close()


def test_redis_client_waits_are_the_cache_settings() -> None:
    cache = {"backend": "redis", "url": "redis://127.0.0.1:1/0"}
    cache.update(connect_timeout_seconds=0.3, socket_timeout_seconds=0.4)
    service = open_service({"store": {"backend": "memory"}, "cache": cache})
    try:
        client = service.store.cache.cache.client  # type: ignore[attr-defined]
        given = client.connection_pool.connection_kwargs
        assert (given["socket_connect_timeout"], given["socket_timeout"]) == (0.3, 0.4)
    finally:
        service.close()
