"""``imbucket migrate`` into an empty SQL store writes through the engine's bulk path.

The statements a migration sends to its target are counted at the target's engine
(``EngineStatements``): into an empty store each table gets one bulk write per page — one
``COPY`` on PostgreSQL, one executemany INSERT on SQLite and MariaDB — and no message is
written on its own, so the statements do not grow with the messages. A migration whose
bulk load dies midway (its rows sent, the transaction not committed) leaves only the pages
before it; a second run completes the target and verifies clean.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from imbucket.adapters.sql import bulk_load
from imbucket.app import MessageService, open_service
from imbucket.app.migrate import migrate, verify
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.errors import StoreUnavailable
from imbucket.testing.factories import messages
from imbucket.testing.migration_data import fill
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

ENGINES = ["postgres", "sqlite", "mariadb"]
LAYOUTS = ["row", "bucket"]


@contextmanager
def _target(engine: str, layout: str, folder: Path) -> Iterator[MessageService]:
    """An empty sql-row or sql-bucket store on engine."""
    if engine == "sqlite":
        folder.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{folder / 'target.sqlite'}"
        with open_service({"store": {"backend": f"sql-{layout}", "url": url}}) as service:
            yield service
        return
    scratch = (
        postgres_schema(postgres_server())
        if engine == "postgres"
        else mariadb_database(mariadb_server())
    )
    with scratch as url, open_service({"store": {"backend": f"sql-{layout}", "url": url}}) as s:
        yield s


def _source(conversations: int, per_conversation: int) -> MessageService:
    """A memory store: migration_data's tags, purges and claims, and more conversations."""
    service = open_service({"store": {"backend": "memory"}})
    fill(service)
    for n in range(conversations):
        conversation = f"si_bulk_{n:04d}"
        service.ingest(conversation, messages(1, per_conversation, conversation))
    return service


def _copied(
    engine: str, layout: str, folder: Path, source: MessageService, every: list[str] | None = None
) -> list[str]:
    """The data statements a migration of source sends to an empty target (verified).

    every, if given, receives every statement, transaction control included.
    """
    with _target(engine, layout, folder) as target:
        store_engine = target.store.engine  # type: ignore[attr-defined]

        def seen(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
            if every is not None:
                every.append(statement)

        event.listen(store_engine, "before_cursor_execute", seen)
        try:
            with EngineStatements(store_engine) as trips:
                tally = migrate(source, target)
        finally:
            event.remove(store_engine, "before_cursor_execute", seen)
        assert tally.differences == 0
        assert verify(source, target).differences == 0
        return list(trips.statements)


def _verb(statement: str) -> str:
    words = statement.split()
    if words[0].upper() == "COPY":
        return f"COPY {words[1]}"
    if words[0].upper() == "INSERT":
        return f"INSERT {words[2]}"
    return words[0].upper()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("engine", ENGINES)
def test_an_empty_target_is_written_by_one_bulk_statement_per_table(
    engine: str, layout: str, tmp_path: Path
) -> None:
    small = _copied(engine, layout, tmp_path / "small", _source(5, 20))
    every: list[str] = []
    large = _copied(engine, layout, tmp_path / "large", _source(40, 60), every)
    assert [_verb(s) for s in small] == [_verb(s) for s in large]  # not one more per message
    bulk = "COPY" if engine == "postgres" else "INSERT"
    tables = (
        ["imb_row_messages", "imb_row_deletions", "imb_row_readers"]
        if layout == "row"
        else ["imb_bucket_docs"]
    )
    written = [_verb(s) for s in large if _verb(s).split()[0] in {"COPY", "INSERT"}]
    for table in tables:
        assert written.count(f"{bulk} {table}") == 1, written
    prefix = tables[0].rsplit("_", 1)[0]
    assert written.count(f"{bulk} {prefix}_seqs") == 1, written  # the counters
    assert not any(_verb(s) == "UPDATE" and tables[0] in s for s in large), large
    for loaded in (tables[0], f"{prefix}_seqs"):
        # Each load reads which units exist, then writes, with no savepoint of its own.
        at = [_verb(s) for s in every].index(f"{bulk} {loaded}")
        assert [_verb(s) for s in every[at - 2 : at]] != ["SAVEPOINT", "SELECT"], every[at - 2 :]
        assert _verb(every[at - 1]) == "SELECT", every[at - 1]
        if engine == "postgres":  # the read's text does not grow with the keys it binds
            assert _held_read(small, f"COPY {loaded}") == _held_read(large, f"COPY {loaded}")


def _held_read(statements: list[str], write: str) -> str:
    """The statement just before the first bulk write of a table."""
    return statements[[_verb(s) for s in statements].index(write) - 1]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("engine", ["postgres", "sqlite"])
def test_a_bulk_load_dying_midway_leaves_whole_pages_and_a_rerun_converges(
    engine: str, layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _source(30, 40)
    sent = bulk_load.write_rows
    calls = [0]

    def dying(connection: Any, table: Any, columns: Any, rows: Any) -> None:
        """Write the third page's rows, then die before its transaction commits."""
        if table.name.endswith(("_messages", "_docs")):
            calls[0] += 1
            if calls[0] >= 3:
                sent(connection, table, columns, rows)
                raise StoreUnavailable("connection lost after the rows were sent")
        sent(connection, table, columns, rows)

    with _target(engine, layout, tmp_path) as target:
        monkeypatch.setattr(bulk_load, "write_rows", dying)
        with pytest.raises(StoreUnavailable):
            migrate(source, target, batch=300)
        monkeypatch.undo()
        landed = target.store.stats().messages
        again = migrate(source, target, batch=300)
        assert 0 < landed < again.messages  # the first pages landed, the third rolled back
        assert 0 < again.written < again.slots
        assert verify(source, target).differences == 0
        assert migrate(source, target, batch=300).written == 0
