"""The engine's routine maintenance between the benchmark's workloads (PostgreSQL VACUUM).

A PostgreSQL server in service runs autovacuum: the row versions an UPDATE leaves behind
(with their TOAST chunks: a bucket rewritten by a tag write leaves its whole old value) are
reclaimed in the background, and later writes reuse their space. The servers of these
machines run with ``autovacuum = off``; without it every tag write would grow the tables for
good, and the footprint would measure that setting rather than a layout. So the benchmark does
what autovacuum would, the same for every layout: a plain ``VACUUM`` of the store's tables
after each workload, untimed, on a DBAPI connection of its own (the round-trip and log
counters never see it). Never ``FULL``: no file shrinks; freed space is reused by the next
writes. Other engines reclaim by themselves (InnoDB's purge threads; SQLite reuses the pages
it frees), so they get no step.

Used by the benchmark only, never by the stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from imbucket.ports.message_store import MessageStore


def routine_maintenance(store: MessageStore) -> tuple[Callable[[], None], str] | None:
    """The maintenance step of store's engine and its description, or None when it needs none."""
    from imbucket.adapters.sql import SqlBucketStore, SqlRowStore

    if not isinstance(store, SqlRowStore | SqlBucketStore):
        return None
    tables = store.schema.metadata.sorted_tables
    engine = store.engine
    if engine.dialect.name != "postgresql":
        return None
    quote = engine.dialect.identifier_preparer.format_table
    statements = [f"VACUUM {quote(table)}" for table in tables]

    def vacuum() -> None:
        connection: Any = engine.raw_connection()
        try:
            connection.autocommit = True  # VACUUM cannot run inside a transaction
            cursor = connection.cursor()
            for statement in statements:
                cursor.execute(statement)
        finally:
            connection.close()

    return vacuum, f"VACUUM after each workload, as autovacuum would ({_autovacuum(engine)})"


def _autovacuum(engine: Any) -> str:
    """Whether the server runs autovacuum itself, as the report says it."""
    with engine.connect() as connection:
        setting = connection.exec_driver_sql("SHOW autovacuum").scalar()
    return f"autovacuum = {setting} on this server"
