"""The benchmark's raw-driver arm: pull_latest(20) on sql-row as one hand-written query.

It reads the same tables as ``SqlRowStore`` and returns raw rows: no validation, no
watermark round trip, no projection into views. Comparing its latency with the service's
``pull_latest`` shows what the service layer costs. Not a store: it only reads.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, TextClause, text

from domain.model import MESSAGE_FIELDS


class RawRowLatest:
    """The newest messages of a conversation a viewer may see, in one SELECT."""

    def __init__(self, store: Any) -> None:
        self.engine: Engine = store.engine
        self._query = _latest_query(store.schema)

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """Rows of the newest count seqs above the viewer's floors, newest first.

        Each row holds the message columns, the revoke columns, purged, and whether the
        viewer deleted it (``deleted`` = 1).
        """
        with self.engine.connect() as connection:
            result = connection.execute(
                self._query, {"conv": conversation_id, "viewer": viewer_id, "n": count}
            )
            return list(result.fetchall())


def _latest_query(schema: Any) -> TextClause:
    messages, deletions = schema.messages.name, schema.deletions.name
    seqs, users = schema.seqs.name, schema.user_seqs.name
    columns = ", ".join(f"m.{name}" for name in MESSAGE_FIELDS)
    return text(
        f"""
        SELECT {columns},
               m.revoked_by, m.revoke_role, m.revoke_nickname, m.revoke_time, m.is_read,
               m.purged,
               (SELECT COUNT(*) FROM {deletions} d
                 WHERE d.conversation_id = m.conversation_id AND d.seq = m.seq
                   AND d.user_id = :viewer) AS deleted
          FROM {messages} m
         WHERE m.conversation_id = :conv
           AND m.seq >= COALESCE((SELECT s.min_seq FROM {seqs} s
                                   WHERE s.conversation_id = :conv), 0)
           AND m.seq >= COALESCE((SELECT u.min_seq FROM {users} u
                                   WHERE u.conversation_id = :conv AND u.user_id = :viewer), 0)
         ORDER BY m.seq DESC
         LIMIT :n
        """
    )
