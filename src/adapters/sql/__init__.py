"""SQL stores on SQLite, PostgreSQL and MariaDB through SQLAlchemy Core (see docs/sql.md).

``open_row`` and ``open_bucket`` return a MessageStore and the SeqStore sharing its engine;
closing either disposes of the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from imbucket.adapters.sql.bucket import SqlBucketRepository, SqlBucketStore
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row import SqlRowRepository, SqlRowStore
from imbucket.adapters.sql.schema import Schema, bucket_schema, row_schema
from imbucket.adapters.sql.seq import SqlSeqStore
from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout

__all__ = [
    "SqlBucketRepository",
    "SqlBucketStore",
    "SqlRowRepository",
    "SqlRowStore",
    "SqlSeqStore",
    "open_bucket",
    "open_row",
]

S = TypeVar("S")


def open_row(
    url: str,
    layout: BucketLayout,
    timeouts: Timeouts | None = None,
    pool: PoolSize | None = None,
    *,
    asynchronous: bool = False,
) -> tuple[SqlRowStore, SqlSeqStore]:
    """sql-row at url (``sqlite://`` when empty): tables created on first use.

    asynchronous: on the engine's asyncio driver, every call run in a greenlet (``Database``).
    """
    schema = row_schema()
    return _open(
        Database(url, timeouts, pool, asynchronous=asynchronous),
        schema,
        lambda db: SqlRowStore(SqlRowRepository(db, layout, schema)),
    )


def open_bucket(
    url: str,
    layout: BucketLayout,
    budget: TagBudget | None = None,
    timeouts: Timeouts | None = None,
    pool: PoolSize | None = None,
    *,
    asynchronous: bool = False,
) -> tuple[SqlBucketStore, SqlSeqStore]:
    """sql-bucket at url (``sqlite://`` when empty): tables created on first use.

    asynchronous: on the engine's asyncio driver, every call run in a greenlet (``Database``).
    """
    schema = bucket_schema()
    return _open(
        Database(url, timeouts, pool, asynchronous=asynchronous),
        schema,
        lambda db: SqlBucketStore(SqlBucketRepository(db, layout, schema), budget),
    )


def _open(db: Database, schema: Schema, build: Callable[[Database], S]) -> tuple[S, SqlSeqStore]:
    try:
        store = build(db)
    except BaseException:
        db.close()
        raise
    return store, SqlSeqStore(db, schema)
