"""Reads sent as text compiled once, on the driver's cursor: the pulls of sql-row.

SQLAlchemy's execution of a compiled statement builds an execution context and a result
object on every call, and asks the driver for the reply's column description, which psycopg
builds anew each time, one object per column. For a pull of a few dozen columns and twenty
rows that is most of what the client spends on the statement. A ``Prepared`` statement is
compiled once, for the engine's dialect, into the text and the parameter order the driver
takes; ``Database.fetch`` sends it through the connection's cursor-level execution, which
fires the same ``before_cursor_execute``/``after_cursor_execute`` events as every statement
(round-trip counters, fault hooks, the read-timeout watchdog) and translates driver errors
the same way, and returns the driver's rows as they are.

What callers give up: SQLAlchemy's result types. The rows hold what the driver returns, so
a boolean column reads 0 or 1 on SQLite and MariaDB; callers convert. Statements with an
expanding (IN list) or bind-processed parameter are refused at build time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ClauseElement, Dialect
from sqlalchemy.sql.compiler import SQLCompiler


class Prepared:
    """A read statement compiled once for a dialect, bound per call (``params``)."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError("only a SELECT can be prepared")
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise TypeError("a statement with an expanding parameter cannot be prepared")
        if compiled._bind_processors:  # private: no public way to ask
            raise TypeError("a statement whose parameters need processing cannot be prepared")
        self.sql = compiled.string
        self._compiled = compiled
        self._order = tuple(compiled.positiontup or ()) if compiled.positional else None

    def params(self, given: Mapping[str, Any]) -> tuple[Any, ...] | Mapping[str, Any]:
        """The driver's parameters for given (values by bind name; the constants added)."""
        full = self._compiled.construct_params(given)
        if self._order is None:
            return full
        return tuple(full[name] for name in self._order)


def fetch_all(cursor: Any) -> list[Any]:
    """The rows of the statement cursor ran (a module function: instruments wrap it)."""
    rows: list[Any] = cursor.fetchall()
    return rows
