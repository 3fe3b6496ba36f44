"""Storage footprint of tables, from each engine's own catalog (see docs/sql.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    Table,
    bindparam,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.exc import OperationalError

from imbucket.adapters.sql.dialects import Kind
from imbucket.adapters.sql.engine import Database


@dataclass(frozen=True, slots=True)
class Footprint:
    """Bytes the engine spends on the rows and on the indexes of some tables."""

    data_bytes: int
    index_bytes: int


def footprint(db: Database, tables: Sequence[Table]) -> Footprint:
    """Data and index bytes of tables, as the engine reports them."""
    return db.run(lambda connection: _BY_KIND[db.kind](connection, tables))


def _postgresql(connection: Connection, tables: Sequence[Table]) -> Footprint:
    # pg_total_relation_size = heap + TOAST + free-space/visibility maps + indexes.
    sizes = text(
        "SELECT COALESCE(SUM(pg_total_relation_size(rel) - pg_indexes_size(rel)), 0),"
        " COALESCE(SUM(pg_indexes_size(rel)), 0)"
        " FROM (SELECT to_regclass(name) AS rel FROM unnest(CAST(:names AS text[])) AS name) AS t"
        " WHERE rel IS NOT NULL"
    )
    data, index = connection.execute(sizes, {"names": [t.name for t in tables]}).one()
    return Footprint(int(data), int(index))


def _mariadb(connection: Connection, tables: Sequence[Table]) -> Footprint:
    names = [t.name for t in tables]
    # InnoDB refreshes its persistent statistics lazily; ANALYZE makes them current.
    connection.exec_driver_sql("ANALYZE TABLE " + ", ".join(f"`{n}`" for n in names)).all()
    # The catalog counts a page-compressed table's pages whole; its file has holes where they
    # shrank, so such a table counts what the file system holds (pages InnoDB has written).
    on_disk = (
        "CASE WHEN t.CREATE_OPTIONS LIKE '%page_compressed%' THEN"
        " COALESCE(LEAST(1, s.ALLOCATED_SIZE / NULLIF(t.DATA_LENGTH + t.INDEX_LENGTH, 0)), 1)"
        " ELSE 1 END"
    )
    sizes = text(
        f"SELECT COALESCE(SUM(t.DATA_LENGTH * {on_disk}), 0),"
        f" COALESCE(SUM(t.INDEX_LENGTH * {on_disk}), 0)"
        " FROM information_schema.TABLES AS t"
        " LEFT JOIN information_schema.INNODB_SYS_TABLESPACES AS s"
        " ON s.NAME = CONCAT(t.TABLE_SCHEMA, '/', t.TABLE_NAME)"
        " WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME IN :names"
    ).bindparams(bindparam("names", expanding=True))
    data, index = (round(n) for n in connection.execute(sizes, {"names": names}).one())
    # InnoDB keeps rows inside the primary-key B-tree, so INDEX_LENGTH counts secondary
    # indexes only; the key bytes of every record are moved from data to index.
    keys = sum(int(connection.execute(_key_bytes(table)).scalar_one()) for table in tables)
    keys = min(keys, int(data))
    return Footprint(int(data) - keys, int(index) + keys)


def _sqlite(connection: Connection, tables: Sequence[Table]) -> Footprint:
    names = [t.name for t in tables]
    try:
        sizes = text(
            "SELECT COALESCE(SUM(CASE WHEN m.type = 'table' THEN d.pgsize END), 0),"
            " COALESCE(SUM(CASE WHEN m.type = 'index' THEN d.pgsize END), 0)"
            " FROM dbstat AS d JOIN sqlite_master AS m ON m.name = d.name"
            " WHERE m.tbl_name IN :names"
        ).bindparams(bindparam("names", expanding=True))
        data, index = connection.execute(sizes, {"names": names}).one()
    except OperationalError:  # SQLite built without the dbstat table: whole-file page counts
        page = int(connection.exec_driver_sql("PRAGMA page_size").scalar_one())
        used = int(connection.exec_driver_sql("PRAGMA page_count").scalar_one()) - int(
            connection.exec_driver_sql("PRAGMA freelist_count").scalar_one()
        )
        count = text(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name IN :names"
        ).bindparams(bindparam("names", expanding=True))
        indexes = int(connection.execute(count, {"names": names}).scalar_one())
        data, index = (used - indexes) * page, indexes * page  # an index has at least its root
    return Footprint(int(data), int(index))


def _key_bytes(table: Table) -> Select[Any]:
    """SELECT the summed size of the primary-key values of every row (8 per integer)."""
    parts: list[ColumnElement[Any]] = [
        func.length(column) if isinstance(column.type, String) else literal(8)
        for column in table.primary_key.columns
    ]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return select(func.coalesce(func.sum(total), 0))


_BY_KIND: dict[Kind, Callable[[Connection, Sequence[Table]], Footprint]] = {
    "postgresql": _postgresql,
    "mariadb": _mariadb,
    "sqlite": _sqlite,
}
