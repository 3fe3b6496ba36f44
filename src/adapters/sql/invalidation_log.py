"""SqlInvalidationLog: undelivered cache invalidations as rows next to the store's tables."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Table, bindparam, delete, insert, select

from imbucket.adapters.sql.engine import Database
from imbucket.domain.invalidation import Invalidation, decoded
from imbucket.ports.invalidation_log import LoggedInvalidation


class SqlInvalidationLog:
    """InvalidationLog on the ``…_cache_log`` table of a SQL store: one statement a call."""

    def __init__(self, db: Database, table: Table) -> None:
        self.db = db
        self.table = table
        columns = table.c
        self._append = insert(table).values(
            conversation_id=bindparam("conversation_id"),
            body=bindparam("body"),
            written_at=bindparam("written_at"),
        )
        self._read = (
            select(columns.id, columns.conversation_id, columns.body, columns.written_at)
            .order_by(columns.id)
            .limit(bindparam("limit"))
        )
        self._remove = delete(table).where(columns.id.in_(bindparam("ids", expanding=True)))

    def append(self, invalidation: Invalidation, written_at: float) -> None:
        """One INSERT (a repeated one only adds a harmless twin entry)."""
        params = {
            "conversation_id": invalidation.conversation_id,
            "body": invalidation.encode(),
            "written_at": written_at,
        }
        self.db.execute(self._append, params)

    def read(self, limit: int) -> list[LoggedInvalidation]:
        """One SELECT of the oldest entries (one this code did not write names nothing)."""
        rows = self.db.execute(self._read, {"limit": limit}).rows
        return [
            LoggedInvalidation(key, float(written_at), decoded(conversation_id, body))
            for key, conversation_id, body, written_at in rows
        ]

    def remove(self, keys: Sequence[object]) -> None:
        """One DELETE by id."""
        if keys:
            self.db.execute(self._remove, {"ids": list(keys)})
