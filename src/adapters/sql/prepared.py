"""Statements compiled once, run on the driver's cursor: the pulls of sql-row, a fresh send.

SQLAlchemy's execution of a compiled statement builds an execution context and a result
object on every call, and asks the driver for the reply's column description, which psycopg
builds anew each time, one object per column. For a pull of a few dozen columns and twenty
rows, or a send's claim and insert, that is most of what the client spends on the statement.
A ``Prepared`` statement is compiled once, for the engine's dialect, into the text and the
parameter order the driver takes; ``Database.fetch`` and ``Database.on`` send it through the
connection's cursor-level execution, which fires the same
``before_cursor_execute``/``after_cursor_execute`` events as every statement (round-trip
counters, fault hooks, the read-timeout watchdog) and translates driver errors the same way,
and return the driver's rows as they are.

What callers give up: SQLAlchemy's result types. The rows hold what the driver returns, so
a boolean column reads 0 or 1 on SQLite and MariaDB; callers convert. Statements with an
expanding (IN list) parameter are refused at build time; a parameter whose type processes
its value (a boolean column) is processed per call as SQLAlchemy would.

``PreparedRows`` is a multi-row INSERT of one to ``MAX_ROWS`` rows, compiled once per row
count: a send's batch is nearly always one row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from sqlalchemy import ClauseElement, Dialect, text
from sqlalchemy.sql.compiler import SQLCompiler

# The most rows a PreparedRows statement takes; a larger batch goes through SQLAlchemy.
MAX_ROWS = 16


class Prepared:
    """A statement compiled once for a dialect, bound per call (``params``)."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError("only a SQL statement can be prepared")
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise TypeError("a statement with an expanding parameter cannot be prepared")
        self.sql = compiled.string
        self._compiled = compiled
        # private: no public way to ask which parameters a type processes
        processors: Mapping[str, Any] = compiled._bind_processors
        self._processors = tuple(processors.items())
        self._order = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._binds = _plain_binds(compiled)

    def params(self, given: Mapping[str, Any]) -> tuple[Any, ...] | Mapping[str, Any]:
        """The driver's parameters for given (values by bind name; the constants added)."""
        full = self._bound(given)
        for name, process in self._processors:
            if name in full:
                full[name] = process(full[name])
        if self._order is None:
            return full
        return tuple([full[name] for name in self._order])

    def _bound(self, given: Mapping[str, Any]) -> MutableMapping[str, Any]:
        """Every bind's value: given's, else the bind's constant, as ``construct_params``."""
        if self._binds is None:
            return self._compiled.construct_params(given)
        base, binds = self._binds
        values = {**base, **given} if base else given
        full: dict[str, Any] = {}
        for name, key, required, value in binds:
            if key in values:
                full[name] = values[key]
            elif name in values:
                full[name] = values[name]
            elif required:  # SQLAlchemy's error for a value not given
                return self._compiled.construct_params(given)
            else:
                full[name] = value
        return full


Binds = tuple[dict[str, Any], tuple[tuple[str, str, bool, Any], ...]]


def _plain_binds(compiled: SQLCompiler) -> Binds | None:
    """What ``construct_params`` reads, when its work is picking values.

    The parameters collected at compile time, and each bind's name, key, whether it needs
    a value and its constant. None when it does more for this statement (escaped names,
    values computed per call, post-compile expansion): it then runs on every call.
    """
    # private: no public way to ask
    if compiled.escaped_bind_names or getattr(compiled, "_render_postcompile", True):
        return None
    collected: dict[str, Any] = {}
    if getattr(compiled, "_collect_params", True):
        collected = dict(getattr(compiled, "_collected_params", None) or {})
    binds: list[tuple[str, str, bool, Any]] = []
    for bind, name in compiled.bind_names.items():
        if bind.callable is not None:
            return None
        binds.append((name, bind.key, bool(bind.required), bind.value))
    return collected, tuple(binds)


class PreparedRows:
    """A multi-row INSERT compiled once per row count, up to ``MAX_ROWS`` rows.

    build(n) gives the statement of n rows whose values are bound as ``{column}_{i}``
    (``row_binds``); ``get`` is None for more rows, which go through SQLAlchemy.
    """

    def __init__(self, build: Callable[[int], ClauseElement], dialect: Dialect) -> None:
        self._build = build
        self._dialect = dialect
        self._by_count: dict[int, Prepared] = {}

    def get(self, count: int) -> Prepared | None:
        """The statement of count rows (compiled on first use), or None beyond MAX_ROWS."""
        if not 0 < count <= MAX_ROWS:
            return None
        found = self._by_count.get(count)
        if found is None:
            found = self._by_count[count] = Prepared(self._build(count), self._dialect)
        return found


class PreparedTexts:
    """SQL texts (``:name`` binds) compiled once each, the most recent ``most`` kept.

    For statements whose text depends on the call's shape (a bucket's slot indexes) but
    repeats across calls.
    """

    def __init__(self, dialect: Dialect, most: int = 1024) -> None:
        self._dialect = dialect
        self._most = most
        self._by_text: dict[str, Prepared] = {}

    def get(self, sql: str) -> Prepared:
        """The statement of sql, compiled on first use."""
        found = self._by_text.pop(sql, None)
        if found is None:
            found = Prepared(text(sql), self._dialect)
            if len(self._by_text) >= self._most:
                del self._by_text[next(iter(self._by_text))]  # the least recently used
        self._by_text[sql] = found
        return found


def row_binds(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The values of rows by the bind names of a ``PreparedRows`` statement."""
    return {f"{name}_{i}": value for i, row in enumerate(rows) for name, value in row.items()}


def fetch_all(cursor: Any) -> list[Any]:
    """The rows of the statement cursor ran (a module function: instruments wrap it)."""
    rows: list[Any] = cursor.fetchall()
    return rows
