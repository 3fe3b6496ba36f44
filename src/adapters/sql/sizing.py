"""How much one SQL statement may carry, asked from the server, and batches that respect it.

A statement that carries many messages (a multi-row INSERT, a bucket UPDATE) must fit the
engine's limits, or it is refused every time it is sent:

- MariaDB: the whole statement must fit ``@@max_allowed_packet`` (16 MiB by default). PyMySQL
  sends values inline, quoted and escaped, so a value costs its UTF-8 bytes plus one byte per
  escaped character plus its quotes.
- PostgreSQL: at most 65,535 bind parameters per statement (the protocol counts them in 16
  bits); values travel apart from the text, up to the 1 GiB message limit.
- SQLite: at most ``SQLITE_LIMIT_VARIABLE_NUMBER`` bind parameters, each value at most
  ``SQLITE_LIMIT_LENGTH`` bytes.

Each Database asks once (docs/sql.md, "Statement limits").
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Connection

from imbucket.domain.errors import WriteRefused

T = TypeVar("T")

# The statement's own text around its values (table, column names, keywords, RETURNING).
STATEMENT_OVERHEAD = 4096
# Per value: quotes and a comma, or a placeholder and a comma.
VALUE_OVERHEAD = 4
# Characters PyMySQL escapes with a backslash inside a quoted value.
_ESCAPED = ("\\", "'", '"', "\n", "\r", "\x00", "\x1a")  # value_bytes counts each
_ANY_ESCAPED = re.compile(f"[{re.escape(''.join(_ESCAPED))}]")
_POSTGRES_PARAMS = 65_535
_POSTGRES_BYTES = 1024 * 1024 * 1024 - 1
# pymysql interpolates values client-side: no placeholder limit, only the packet.
_UNLIMITED_PARAMS = 1 << 62


@dataclass(frozen=True, slots=True)
class StatementLimits:
    """What one statement may carry: bytes on the wire, and bind parameters."""

    max_bytes: int
    max_params: int


def ask_limits(kind: str, connection: Connection) -> StatementLimits:
    """The limits of the server behind connection (one query on MariaDB, none elsewhere)."""
    if kind == "mariadb":
        packet = connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one()
        return StatementLimits(int(packet), _UNLIMITED_PARAMS)
    if kind == "postgresql":
        return StatementLimits(_POSTGRES_BYTES, _POSTGRES_PARAMS)
    raw: Any = connection.connection.driver_connection
    # aiosqlite (imbucket.aio) keeps the sqlite3 connection it runs in its thread.
    raw = getattr(raw, "_conn", raw)
    return StatementLimits(
        raw.getlimit(sqlite3.SQLITE_LIMIT_LENGTH),
        raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER),
    )


def value_bytes(value: object) -> int:
    """Upper bound of what value costs inside a statement, on every engine."""
    if isinstance(value, str):
        size = (len(value) if value.isascii() else len(value.encode())) + VALUE_OVERHEAD
        if _ANY_ESCAPED.search(value) is None:  # one scan settles nearly every value
            return size
        count = value.count
        return (
            size
            + count("\\")
            + count("'")
            + count('"')
            + count("\n")
            + count("\r")
            + (count("\x00") + count("\x1a"))
        )
    if isinstance(value, bytes):
        return 2 * len(value) + VALUE_OVERHEAD
    return 20 + VALUE_OVERHEAD  # an int, a bool or NULL, spelled out


def row_bytes(row: Mapping[str, object]) -> int:
    """Upper bound of one row of values inside a multi-row statement."""
    return sum(value_bytes(value) for value in row.values()) + VALUE_OVERHEAD


def row_bytes_at_most(row: Mapping[str, object]) -> int:
    """A cheap bound of ``row_bytes`` (never below it), from the lengths alone.

    A character takes at most 4 bytes of UTF-8 and 1 of escaping, a bytes value 2 per byte.
    """
    total = VALUE_OVERHEAD
    for value in row.values():
        if isinstance(value, str | bytes):
            total += 5 * len(value) + VALUE_OVERHEAD
        else:
            total += 20 + VALUE_OVERHEAD
    return total


def batches(
    items: Sequence[T], sizes: Sequence[int], params: int, limits: StatementLimits
) -> Iterator[Sequence[T]]:
    """Split items (of sizes bytes and params parameters each) into statements that fit.

    Raises WriteRefused when a single item does not fit on its own: no split can store it.
    """
    budget = limits.max_bytes - STATEMENT_OVERHEAD
    start, used = 0, 0
    for end, size in enumerate(sizes):
        if size > budget or params > limits.max_params:
            raise WriteRefused(
                f"a value of {size} bytes does not fit one statement ({budget} bytes at most)"
            )
        count = end - start + 1
        if end > start and (used + size > budget or count * params > limits.max_params):
            yield items[start:end]
            start, used = end, 0
        used += size
    if start < len(items):
        yield items[start:]
