"""The engine's routine maintenance between the benchmark's workloads.

PostgreSQL: VACUUM. MariaDB: writing back the dirty pages of page-compressed tables. And,
for the clustered-rows arm on PostgreSQL, ``CLUSTER`` after the load.

A PostgreSQL server in service runs autovacuum: the row versions an UPDATE leaves behind
(with their TOAST chunks: a bucket rewritten by a tag write leaves its whole old value) are
reclaimed in the background, and later writes reuse their space. The servers of these
machines run with ``autovacuum = off``; without it every tag write would grow the tables for
good, and the footprint would measure that setting rather than a layout. So the benchmark does
what autovacuum would, the same for every layout: a plain ``VACUUM`` of the store's tables
after each workload, untimed, on a DBAPI connection of its own (the round-trip and log
counters never see it). Never ``FULL``: no file shrinks; freed space is reused by the next
writes. Other engines reclaim by themselves (InnoDB's purge threads; SQLite reuses the pages
it frees).

A page-compressed InnoDB table (MariaDB's bucket table) takes its compressed size on disk only
once InnoDB writes its pages back, which a server does in the background at its own pace; its
footprint counts what the file system holds. So on MariaDB the benchmark writes those pages
back after each workload (``FLUSH TABLES … FOR EXPORT``, then ``UNLOCK TABLES``), untimed, and
the footprint is the same whenever it is read. An account without the RELOAD privilege
gets a step that does nothing, and the report says so.

Used by the benchmark only, never by the stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from imbucket.ports.message_store import MessageStore

if TYPE_CHECKING:
    from imbucket.adapters.sql import SqlBucketStore, SqlRowStore


def write_back(store: MessageStore) -> None:
    """Write back store's page-compressed tables, so that its footprint counts them whole.

    For a footprint read after a bulk load (the memory-budget and scale runs); nothing on a
    store without such tables.
    """
    _write_back(store)  # building the step writes the pages back once


def routine_maintenance(store: MessageStore) -> tuple[Callable[[], None], str] | None:
    """The maintenance step of store's engine and its description, or None when it needs none."""
    sql = _sql_store(store)
    if sql is None:
        return None
    if sql.engine.dialect.name in ("mysql", "mariadb"):
        return _write_back(store)
    if sql.engine.dialect.name != "postgresql":
        return None
    engine = sql.engine
    quote = engine.dialect.identifier_preparer.format_table
    statements = [f"VACUUM {quote(table)}" for table in sql.schema.metadata.sorted_tables]

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


def _sql_store(store: MessageStore) -> SqlRowStore | SqlBucketStore | None:
    """The store itself when it is a SQL store, else None."""
    from imbucket.adapters.sql import SqlBucketStore, SqlRowStore

    return store if isinstance(store, SqlRowStore | SqlBucketStore) else None


def _write_back(store: MessageStore) -> tuple[Callable[[], None], str] | None:
    """The step that writes back a MariaDB store's page-compressed tables, or None.

    Building it runs the write-back once, which also finds out whether the account may.
    """
    sql = _sql_store(store)
    if sql is None or sql.engine.dialect.name not in ("mysql", "mariadb"):
        return None
    engine: Any = sql.engine
    tables = [
        engine.dialect.identifier_preparer.format_table(table)
        for table in sql.schema.metadata.sorted_tables
        if table.dialect_kwargs.get("mysql_page_compressed")
    ]
    if not tables:
        return None
    statement = f"FLUSH TABLES {', '.join(tables)} FOR EXPORT"

    def flush() -> None:
        connection: Any = engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute(statement)
            cursor.execute("UNLOCK TABLES")
        finally:
            connection.close()

    try:  # FLUSH … FOR EXPORT needs the RELOAD privilege, which a store's account may lack
        flush()
    except engine.dialect.loaded_dbapi.Error as error:
        return _nothing, (
            f"page-compressed tables not written back (FLUSH … FOR EXPORT refused: {error}):"
            " their bytes count only the pages the server wrote back itself"
        )
    return flush, "page-compressed tables written back after each workload (FLUSH … FOR EXPORT)"


def cluster_rows(store: MessageStore) -> str:
    """Rewrite a PostgreSQL store's tables in the order of their primary keys; say what ran.

    The maintenance a DBA runs on a row table whose heap is in arrival order: ``CLUSTER``
    by the primary key (for messages ``(conversation_id, seq)``), so that a conversation's
    rows share pages, then ``VACUUM (ANALYZE)`` (statistics, and the visibility map that
    index-only scans read, which ``CLUSTER`` leaves unset). PostgreSQL does not keep the
    order for later writes; the step is run once, after the bulk load. ValueError on another
    engine.
    """
    sql = _sql_store(store)
    if sql is None or sql.engine.dialect.name != "postgresql":
        raise ValueError("clustering rows is a PostgreSQL step")
    engine: Any = sql.engine
    quote = engine.dialect.identifier_preparer.format_table
    tables = [quote(t) for t in sql.schema.metadata.sorted_tables if t.primary_key.columns]
    connection: Any = engine.raw_connection()
    try:
        connection.autocommit = True
        cursor = connection.cursor()
        for table in tables:
            cursor.execute(
                "SELECT indexrelid::regclass::text FROM pg_index"
                " WHERE indrelid = %s::regclass AND indisprimary",
                (table,),
            )
            (index,) = cursor.fetchone()
            cursor.execute(f"CLUSTER {table} USING {index}")
            cursor.execute(f"VACUUM (ANALYZE) {table}")
    finally:
        connection.close()
    return f"CLUSTER by primary key, then VACUUM (ANALYZE), after the load ({len(tables)} tables)"


def _nothing() -> None:
    """A maintenance step that does nothing (the engine refused the real one)."""


def _autovacuum(engine: Any) -> str:
    """Whether the server runs autovacuum itself, as the report says it."""
    with engine.connect() as connection:
        setting = connection.exec_driver_sql("SHOW autovacuum").scalar()
    return f"autovacuum = {setting} on this server"
