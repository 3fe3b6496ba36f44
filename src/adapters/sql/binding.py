"""SqlCacheBinding: the store's cache binding as one row next to its layout record."""

from __future__ import annotations

from sqlalchemy import Table, select, update

from imbucket.adapters.sql.engine import Database


class SqlCacheBinding:
    """CacheBindingRecord on the ``…_cache_binding`` table of a SQL store (row id 1)."""

    def __init__(self, db: Database, table: Table) -> None:
        self.db = db
        self.table = table

    def record(self, binding: str) -> str:
        """Insert binding unless a row exists; the recorded binding."""
        self.db.execute(self.db.insert_ignore(self.table).values(id=1, binding=binding))
        rows = self.db.execute(select(self.table.c.binding).where(self.table.c.id == 1)).rows
        return str(rows[0][0])

    def replace(self, expected: str, binding: str) -> bool:
        """Compare-and-set in one UPDATE."""
        table = self.table
        statement = (
            update(table)
            .where(table.c.id == 1, table.c.binding == expected)
            .values(binding=binding)
        )
        return self.db.execute(statement).rowcount == 1
