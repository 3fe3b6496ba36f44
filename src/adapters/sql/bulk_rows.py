"""Rows into a table by the engine's bulk path (the stores' ``BulkLoad``, ``BulkCounterLoad``).

``COPY … FROM STDIN`` on PostgreSQL (psycopg's copy protocol, rows sent as tuples, in the
binary format when every column is of a plain type: integers, booleans, text);
``executemany`` of one INSERT elsewhere (SQLite runs it in C inside the transaction;
PyMySQL sends it as multi-row INSERTs within ``max_allowed_packet``). Plain INSERTs (no
IGNORE, no ON CONFLICT): a row that exists makes the write fail rather than be skipped or
overwritten, so callers write only keys they found absent in the same transaction, read
with a ``HeldRead``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Connection,
    Dialect,
    Select,
    String,
    Table,
    any_,
    bindparam,
    cast,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError

from imbucket.adapters.sql.engine import Database, on_cursor
from imbucket.adapters.sql.prepared import Prepared

# PostgreSQL's types whose binary form psycopg writes from the Python values the stores
# send (int, bool, str), by the type's name as the dialect spells it. Any other column
# (JSONB, whose value is sent as its text) makes the whole COPY use the text format.
_BINARY_TYPES = {
    "BIGINT": "int8",
    "INTEGER": "int4",
    "SMALLINT": "int2",
    "BOOLEAN": "bool",
    "VARCHAR": "text",
    "TEXT": "text",
}
_binary_types: dict[tuple[Table, tuple[str, ...]], list[str] | None] = {}


def write_rows(
    connection: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Insert rows (values in the order of columns) into table by the engine's bulk path.

    On PostgreSQL rows are drawn one by one while the COPY is open, so that a caller
    building them lazily (a generator) builds each while the server stores those sent.
    """
    if connection.dialect.name == "postgresql":
        stream = iter(rows)
        first = next(stream, None)
        if first is not None:
            _copy(connection, table, columns, itertools.chain((first,), stream))
        return
    listed = list(rows)
    if not listed:
        return
    # Bound untyped: the values are as the columns store them (a JSON column's text is not
    # encoded again), as COPY sends them.
    keys = [f"p{n}" for n in range(len(columns))]
    statement = text(
        f"INSERT INTO {table.fullname} ({', '.join(columns)})"
        f" VALUES ({', '.join(':' + key for key in keys)})"
    )
    connection.execute(statement, [dict(zip(keys, row, strict=True)) for row in listed])


def _copy(
    connection: Connection, table: Table, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """``COPY … FROM STDIN`` of rows on the connection's psycopg connection."""
    names = ", ".join(f'"{name}"' for name in columns)
    types = binary_types(connection.dialect, table, columns)
    binary = "" if types is None else " (FORMAT BINARY)"
    sql = f"COPY {table.fullname} ({names}) FROM STDIN{binary}"
    driver: Any = connection.connection.driver_connection
    # The copy protocol bypasses SQLAlchemy's execution: tell its listeners (round-trip
    # instrumentation) that a statement goes out, as every other statement does.
    connection.dispatch.before_cursor_execute(connection, None, sql, None, None, False)
    try:
        with driver.cursor() as cursor, cursor.copy(sql) as copy:
            if types is not None:
                copy.set_types(types)
            write = copy.write_row
            for row in rows:
                write(row)
    except driver.Error as error:  # translated like any statement's failure (engine.py)
        raise DBAPIError.instance(sql, None, error, driver.Error) from error


def binary_types(dialect: Dialect, table: Table, columns: Sequence[str]) -> list[str] | None:
    """The binary COPY types of columns, or None when one has no plain binary form.

    Binary rows cost the client and the server less to encode and parse than text ones.
    """
    key = (table, tuple(columns))
    if key not in _binary_types:
        names = [table.c[name].type.compile(dialect=dialect).split("(")[0] for name in columns]
        types = [_BINARY_TYPES.get(name) for name in names]
        _binary_types[key] = None if None in types else [t for t in types if t is not None]
    return _binary_types[key]


Among = Callable[[ColumnElement[Any], str], ColumnElement[bool]]


class HeldRead:
    """A load's read of which units exist: a column among a bound list of keys.

    On PostgreSQL the list is one array parameter (``= ANY``), so the statement is compiled
    and parsed once per store and run on the driver's cursor; elsewhere it is an expanding
    IN list, rendered per call. Rows are the driver's own tuples either way.
    """

    def __init__(
        self, db: Database, build: Callable[[Among], Select[Any] | CompoundSelect[Any]]
    ) -> None:
        self._prepared: Prepared | None = None
        self._statement: Select[Any] | CompoundSelect[Any] | None = None
        if db.kind == "postgresql":
            self._prepared = Prepared(build(_any_of), db.engine.dialect)
        else:
            self._statement = build(_in_list)

    def rows(self, connection: Connection, params: Mapping[str, Any]) -> Sequence[Any]:
        """The statement's rows for params (the keys' list bound by its name)."""
        if self._prepared is not None:
            return on_cursor(connection, self._prepared.sql, self._prepared.params(params)).rows
        assert self._statement is not None
        rows: Sequence[Any] = connection.execute(self._statement, params).cursor.fetchall()
        return rows


def _any_of(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    return column == any_(cast(bindparam(name), ARRAY(String)))


def _in_list(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    return column.in_(bindparam(name, expanding=True))
