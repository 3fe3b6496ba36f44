"""A PostgreSQL table that refuses some writes, as the engine refuses a value it does not take."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

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
