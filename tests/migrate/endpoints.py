"""The persistent backend rows a migration test can use as source or target.

Each row opens a namespace of its own (an SQLite file, a PostgreSQL schema, a MariaDB
database, a MongoDB database) inside an ExitStack, so one test can hold two of the same
kind. Server rows skip with their reason when no server answers (tests/servers.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from tests.mongo import mongo_database
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

Config = dict[str, Any]
Url = Callable[[ExitStack, Path], str]


def _sqlite(stack: ExitStack, folder: Path) -> str:
    return f"sqlite:///{folder / f'store-{uuid.uuid4().hex[:8]}.db'}"


def _postgres(stack: ExitStack, folder: Path) -> str:
    return stack.enter_context(postgres_schema(postgres_server()))


def _mariadb(stack: ExitStack, folder: Path) -> str:
    return stack.enter_context(mariadb_database(mariadb_server()))


def _mongo(stack: ExitStack, folder: Path) -> str:
    return stack.enter_context(mongo_database())


# row id -> (store backend, where its namespace comes from)
ROWS: dict[str, tuple[str, Url]] = {
    "sql-row-sqlite": ("sql-row", _sqlite),
    "sql-bucket-sqlite": ("sql-bucket", _sqlite),
    "sql-row-postgres": ("sql-row", _postgres),
    "sql-bucket-postgres": ("sql-bucket", _postgres),
    "sql-row-mariadb": ("sql-row", _mariadb),
    "sql-bucket-mariadb": ("sql-bucket", _mariadb),
    "mongo-row": ("mongo-row", _mongo),
    "mongo-bucket": ("mongo-bucket", _mongo),
}
# Limits that let a bucket of 500 slots stay under the default 8 MiB bound.
SMALL_MESSAGES = {"max_message_bytes": 10_000, "max_content_bytes": 8_000}


def config(
    row: str, stack: ExitStack, folder: Path, bucket_size: int = 100, **store: Any
) -> Config:
    """The open_service config of a fresh namespace of row (closed with stack)."""
    backend, url = ROWS[row]
    settings: Config = {
        "store": {
            "backend": backend,
            "url": url(stack, folder),
            "bucket_size": bucket_size,
            **store,
        },
        "cache": {"backend": "none"},
    }
    if bucket_size > 100:
        settings["limits"] = SMALL_MESSAGES
    return settings
