"""The SQL engine's retry policy, without a server: failures raised by hand, closed ports.

What is tried again and how often: see docs/faults.md. Real connection losses on PostgreSQL
and MariaDB are in tests/faults/.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.faults import ATTEMPTS, Fault
from imbucket.adapters.sql.schema import row_schema
from imbucket.adapters.sql.seq import SqlSeqStore
from imbucket.app import open_service
from imbucket.domain.errors import InvalidArgument, OutcomeUnknown, StoreUnavailable
from tests.unit.flaky_work import Flaky


class Deadlock(Exception):
    sqlstate = "40P01"


def lost() -> OperationalError:
    """What SQLAlchemy raises when the driver reports the connection gone."""
    orig = Exception("server closed the connection unexpectedly")
    return OperationalError("SELECT 1", None, orig, connection_invalidated=True)


def retries(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.name == "imbucket.adapters.sql.engine")


@pytest.mark.parametrize("atomic", [False, True], ids=["autocommit", "transaction"])
def test_idempotent_work_is_tried_again_after_a_lost_connection(
    db: Database, atomic: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    work = Flaky(lost(), failures=ATTEMPTS[Fault.LOST] - 1)
    assert db.run(work, atomic=atomic) == "done"
    assert work.runs == ATTEMPTS[Fault.LOST]
    assert retries(caplog) == ATTEMPTS[Fault.LOST] - 1


def test_a_connection_lost_on_every_attempt_gives_store_unavailable(db: Database) -> None:
    work = Flaky(lost(), failures=100)
    with pytest.raises(StoreUnavailable, match="connection lost on each of 3 attempts") as error:
        db.run(work)
    assert not isinstance(error.value, OutcomeUnknown)
    assert work.runs == ATTEMPTS[Fault.LOST]


def test_other_work_is_not_repeated_when_its_outcome_is_unknown(db: Database) -> None:
    work = Flaky(lost(), failures=1)
    with pytest.raises(OutcomeUnknown, match="may or may not have been applied"):
        db.run(work, idempotent=False)
    assert work.runs == 1


def test_other_work_is_repeated_when_its_transaction_was_rolled_back(db: Database) -> None:
    work = Flaky(lost(), failures=1)  # lost before COMMIT: the server rolls back
    assert db.run(work, atomic=True, idempotent=False) == "done"
    assert work.runs == 2


def test_deadlocks_are_tried_again_a_few_more_times(db: Database) -> None:
    deadlock = OperationalError("UPDATE t", None, Deadlock("deadlock detected"))
    work = Flaky(deadlock, failures=ATTEMPTS[Fault.CONTENTION] - 1)
    assert db.run(work, idempotent=False) == "done"  # the engine undid the statement
    work = Flaky(deadlock, failures=100)
    with pytest.raises(StoreUnavailable, match="deadlock or lock timeout on each of 8"):
        db.run(work)
    assert work.runs == ATTEMPTS[Fault.CONTENTION]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (IntegrityError("INSERT", None, Exception("duplicate key")), StoreUnavailable),
        (DataError("INSERT", None, Exception("value too long")), InvalidArgument),
    ],
)
def test_other_errors_are_final(db: Database, error: Exception, expected: type) -> None:
    work = Flaky(error, failures=100)
    with pytest.raises(expected):
        db.run(work)
    assert work.runs == 1


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        return int(listener.getsockname()[1])


SERVERS = {
    "postgres": ("postgresql+psycopg://postgres@127.0.0.1:{port}/test", "PostgreSQL"),
    "mariadb": ("mysql+pymysql://root@127.0.0.1:{port}/test", "MariaDB"),
}


@pytest.fixture(params=SERVERS.values(), ids=SERVERS.keys())
def dead(request: pytest.FixtureRequest) -> Iterator[tuple[Database, list[object]]]:
    """A Database on a closed local port, and the list of its attempts to connect."""
    url, _ = request.param
    database = Database(url.format(port=closed_port()))
    connects: list[object] = []
    event.listen(database.engine, "do_connect", lambda *args: connects.append(args))
    yield database, connects
    database.close()


def test_a_closed_port_is_tried_a_bounded_number_of_times(
    dead: tuple[Database, list[object]],
) -> None:
    db, connects = dead
    message = rf"{db.server} is unreachable after 3 attempts"
    with pytest.raises(StoreUnavailable, match=message):
        db.execute(select(1))
    assert len(connects) == ATTEMPTS[Fault.UNREACHABLE]


def test_an_allocation_that_cannot_connect_is_tried_again_and_allocates_nothing(
    dead: tuple[Database, list[object]],
) -> None:
    db, connects = dead
    with pytest.raises(StoreUnavailable) as error:
        SqlSeqStore(db, row_schema()).allocate("conversation", 1)
    assert not isinstance(error.value, OutcomeUnknown)  # nothing was sent
    assert len(connects) == ATTEMPTS[Fault.UNREACHABLE]


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
@pytest.mark.parametrize(("url", "name"), SERVERS.values(), ids=SERVERS.keys())
def test_opening_a_store_on_a_closed_port_gives_store_unavailable(
    backend: str, url: str, name: str
) -> None:
    port = closed_port()
    config = {"store": {"backend": backend, "url": url.format(port=port)}}
    with pytest.raises(StoreUnavailable, match=f"{name} at 127.0.0.1:{port} is unreachable"):
        open_service(config)
