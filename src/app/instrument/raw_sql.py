"""The benchmark's raw-driver arm: pull_latest(20) on sql-row as one SELECT, no service.

It reads the same tables as ``SqlRowStore`` (built from its schema objects, so a column added
there is read here too) and returns raw rows: no validation, no watermark round trip, no
projection into views. Comparing its latency with the service's ``pull_latest`` shows what
the service layer costs. Not a store: it only reads.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, Engine, Select, bindparam, func, select

from adapters.sql.schema import RowSchema


class RawRowLatest:
    """The newest messages of a conversation a viewer may see, in one SELECT."""

    def __init__(self, engine: Engine, schema: RowSchema) -> None:
        self.engine = engine
        self._query = latest_query(schema)

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """Rows of the newest count seqs above the viewer's floors, newest first.

        Each row holds every column of the messages table and whether the viewer deleted
        it (``deleted`` = 1).
        """
        with self.engine.connect() as connection:
            result = connection.execute(
                self._query, {"conv": conversation_id, "viewer": viewer_id, "n": count}
            )
            return list(result.fetchall())


def latest_query(schema: RowSchema) -> Select[Any]:
    """The SELECT of ``RawRowLatest``, with parameters ``conv``, ``viewer`` and ``n``."""
    m, d = schema.messages, schema.deletions
    seqs, users = schema.seqs, schema.user_seqs
    conv: BindParameter[str] = bindparam("conv")
    viewer: BindParameter[str] = bindparam("viewer")
    deleted = (
        select(func.count())
        .select_from(d)
        .where(
            d.c.conversation_id == m.c.conversation_id,
            d.c.seq == m.c.seq,
            d.c.user_id == viewer,
        )
        .scalar_subquery()
        .label("deleted")
    )
    floor = select(seqs.c.min_seq).where(seqs.c.conversation_id == conv).scalar_subquery()
    user_floor = (
        select(users.c.min_seq)
        .where(users.c.conversation_id == conv, users.c.user_id == viewer)
        .scalar_subquery()
    )
    return (
        select(*m.c, deleted)
        .where(
            m.c.conversation_id == conv,
            m.c.seq >= func.coalesce(floor, 0),
            m.c.seq >= func.coalesce(user_floor, 0),
        )
        .order_by(m.c.seq.desc())
        .limit(bindparam("n"))
    )
