"""Bucket JSON as the SQL engines hand it over and take it: the texts of slots and lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson


def decoded_slots(rows: Sequence[Any]) -> Callable[[int], Any]:
    """A bucket's slot by index (None when absent) from its pull rows.

    The rows hold the whole bucket, or one slot each.
    """
    if rows[0][6] is None:
        whole: list[Any] = loads(rows[0][4])
        return lambda index: whole[index] if index < len(whole) else None
    return {int(row[6]): loads(row[4]) for row in rows}.get


def listed(value: str | bytes | None) -> list[str]:
    """The items of a comma-separated text from the engine (GROUP_CONCAT may give bytes)."""
    if value is None:
        return []
    return (value.decode() if isinstance(value, bytes) else value).split(",")


def loads(value: Any) -> Any:
    """Drivers return JSON as text (MariaDB, SQLite) or already decoded (psycopg)."""
    return orjson.loads(value) if isinstance(value, (str, bytes)) else value


def json_text(value: Any) -> str:
    """JSON text of value as ``dumps`` writes it (compact, non-ASCII kept), in C."""
    return orjson.dumps(value).decode()
