"""A PostgreSQL table that refuses some writes, as the engine refuses a value it does not take."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from sqlalchemy import Engine, text

from imbucket.app import MessageService
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.errors import InvalidArgument
from imbucket.domain.projection import Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, draft

REFUSED = "refused by the database"


@contextmanager
def refusing_writes(engine: Engine, table: str, condition: str) -> Iterator[None]:
    """While open, table refuses every row written where condition (over ``NEW``) holds.

    A trigger raising a data exception (SQLSTATE 22023): the engine's refusal of a value, as
    psycopg reports a value PostgreSQL does not take, on every statement that writes it.
    """
    function, trigger = f"{table}_refuse", f"{table}_refusing"
    with engine.begin() as connection:
        connection.execute(
            text(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                f" IF {condition} THEN"
                " RAISE EXCEPTION 'refused' USING ERRCODE = '22023'; END IF;"
                " RETURN NEW; END $$"
            )
        )
        connection.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE INSERT OR UPDATE ON {table}"
                f" FOR EACH ROW EXECUTE FUNCTION {function}()"
            )
        )
    try:
        yield
    finally:
        with engine.begin() as connection:
            connection.execute(text(f"DROP TRIGGER IF EXISTS {trigger} ON {table}"))
            connection.execute(text(f"DROP FUNCTION IF EXISTS {function}()"))


def check_a_refused_statement_gives_its_seqs_up(service: MessageService) -> None:
    """A batch holding a REFUSED message, sent by the service whose store refuses it.

    The one statement is refused whole (nothing claimed, nothing allocated); the general
    path claims 2..6, its insert is refused, and the seqs holding nothing are purged.
    """
    service.send(CONV, [draft(0)])
    batch = [draft(n) for n in range(1, 6)]
    batch[2] = replace(batch[2], content=REFUSED)
    engine = service.store.engine  # type: ignore[attr-defined]
    with EngineStatements(engine) as trips, pytest.raises(InvalidArgument):
        service.send(CONV, batch)
    assert "stored AS (INSERT" in trips.statements[0]
    entries = service.pull(CONV, "bob", list(range(2, 7)))
    assert entries == [Tombstone(s, TombstoneReason.PURGED) for s in range(2, 7)]
    assert [m.seq for m in service.send(CONV, [draft(9)])] == [7]
