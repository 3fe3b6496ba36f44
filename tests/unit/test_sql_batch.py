"""Database.batch: one transaction for many statements, savepoints for atomic work inside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, event, text

from imbucket.adapters.sql.engine import Database
from imbucket.app import open_service
from imbucket.app.migrate import migrate
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.testing.factories import messages


class _Boom(Exception):
    pass


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = Database(f"sqlite:///{tmp_path / 'batch.db'}")
    database.execute(text("CREATE TABLE t (k INTEGER PRIMARY KEY)"))
    yield database
    database.close()


def _keys(db: Database) -> set[int]:
    return {row[0] for row in db.execute(text("SELECT k FROM t")).rows}


def _put(db: Database, key: int) -> None:
    db.execute(text(f"INSERT INTO t (k) VALUES ({key})"))


def test_a_batch_is_one_transaction_and_commits_once(db: Database) -> None:
    sent: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement.split()[0].upper())

    event.listen(db.engine, "before_cursor_execute", seen)
    with db.batch():
        for key in range(5):
            _put(db, key)
        with db.batch():  # joins the outer one
            _put(db, 5)
    event.remove(db.engine, "before_cursor_execute", seen)
    assert _keys(db) == set(range(6))
    assert sent.count("COMMIT") == 1 and sent.count("INSERT") == 6


def test_a_failure_rolls_the_whole_batch_back(db: Database) -> None:
    _put(db, 1)
    with pytest.raises(_Boom), db.batch():
        _put(db, 2)
        raise _Boom
    assert _keys(db) == {1}


def test_atomic_work_inside_a_batch_is_undone_alone(db: Database) -> None:
    def fails(connection: Connection) -> None:
        connection.execute(text("INSERT INTO t (k) VALUES (20)"))
        raise _Boom

    with db.batch():
        _put(db, 10)
        with pytest.raises(_Boom):
            db.run(fails, atomic=True)
        db.run(lambda c: c.execute(text("INSERT INTO t (k) VALUES (30)")), atomic=True)
    assert _keys(db) == {10, 30}


def test_a_migration_page_costs_a_few_statements_whatever_its_conversations(
    tmp_path: Path,
) -> None:
    source = open_service({"store": {"backend": "memory"}})
    for n in range(40):
        source.ingest(f"c{n:02}", messages(1, 5, f"c{n:02}"))
    target = {"store": {"backend": "sql-bucket", "url": f"sqlite:///{tmp_path / 't.db'}"}}
    with open_service(target) as service, EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
        seen: list[int] = []

        def progress(tally: Any) -> None:
            if tally.phase == "slots":
                seen.append(trips.total)

        assert migrate(source, service, batch=500, progress=progress).written == 200
    # The memory source pages 5 buckets (here 5 conversations) at a time. Each page costs 2
    # statements on the bulk path: one read of which buckets exist, one INSERT creating
    # them all (the target's slots are read only for the buckets it holds already).
    steps = [later - earlier for earlier, later in zip([0, *seen], seen, strict=False)]
    assert seen[-1] == 8 * 2 and max(steps) == 2, (steps, trips.statements[:12])
