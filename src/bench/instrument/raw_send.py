"""The benchmark's raw-driver arm of a send: claim, allocate and store by hand, no service.

The fewest statements that do a fresh send's work on each engine, through the DBAPI
connection itself: PostgreSQL one data-modifying CTE (upsert the counter, insert the claim,
insert the row); SQLite three statements in one ``BEGIN IMMEDIATE`` transaction; MariaDB
three statements and a COMMIT. The tables are sql-row's, under a prefix of their own, so the
row written holds every column the service writes. No validation, no retry, no idempotence
check beyond the claim's primary key: what the service's ``send`` is measured against.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Engine

from imbucket.adapters.codec import message_to_doc
from imbucket.adapters.sql.schema import RowSchema, message_column, row_schema
from imbucket.domain import sending
from imbucket.domain.model import Draft

PREFIX = "imb_rawsend"


class RawSend:
    """One hand-written send per call on the engine's own tables (``PREFIX``)."""

    def __init__(self, engine: Engine, schema: RowSchema | None = None) -> None:
        self.engine = engine
        self.schema = schema or row_schema(PREFIX)
        self.schema.metadata.create_all(engine)  # the messages' triggers name the marks tables
        self.kind = engine.dialect.name
        self._columns = [c.name for c in self.schema.messages.c if c.name not in _FLAGS]
        self._sql = self._statements()

    @property
    def _tables(self) -> list[Any]:
        return [self.schema.seqs, self.schema.sends, self.schema.messages]

    def send(self, conversation_id: str, draft: Draft, now: int) -> int:
        """Store draft as the conversation's next message; returns its seq."""
        row = self._row(conversation_id, draft, now)
        connection: Any = self.engine.raw_connection()
        try:
            cursor = connection.cursor()
            if self.kind == "postgresql":
                cursor.execute(self._sql[0], row)
                seq = int(cursor.fetchone()[0])
            else:
                seq = self._in_transaction(connection, cursor, row)
            cursor.close()
            return seq
        finally:
            connection.close()

    def _in_transaction(self, connection: Any, cursor: Any, row: dict[str, Any]) -> int:
        """SQLite and MariaDB: the three statements between BEGIN and COMMIT."""
        counter, claim, insert = self._sql
        cursor.execute("BEGIN IMMEDIATE" if self.kind == "sqlite" else "START TRANSACTION")
        try:
            cursor.execute(counter, row)
            row["seq"] = int(cursor.fetchone()[0])
            cursor.execute(claim, row)
            cursor.execute(insert, row)
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        return int(row["seq"])

    def _row(self, conversation_id: str, draft: Draft, now: int) -> dict[str, Any]:
        message = sending.stamp(conversation_id, draft, 0, uuid.uuid4().hex, now)
        doc = message_to_doc(message)
        doc["options"] = json.dumps(doc["options"], sort_keys=True)
        doc["at_user_id_list"] = json.dumps(doc["at_user_id_list"])
        push = doc["offline_push"]
        doc["offline_push"] = None if push is None else json.dumps(push)
        doc[message_column("is_read")] = doc.pop("is_read")
        return {**doc, "conversation_id": conversation_id, "at": now}

    def _statements(self) -> list[str]:
        seqs, sends, messages = (t.name for t in self._tables)
        p = _placeholder(self.kind)
        columns = [c for c in self._columns if c != "seq"]
        names = ", ".join(["seq", *columns])
        if self.kind == "postgresql":
            types = {c.name: c.type.compile(self.engine.dialect) for c in self.schema.messages.c}
            values = ", ".join(f"CAST({p(c)} AS {types[c]})" for c in columns)
            return [
                f"WITH counter AS (INSERT INTO {seqs} AS s (conversation_id, max_seq, min_seq)"
                f" VALUES ({p('conversation_id')}, 1, 0) ON CONFLICT (conversation_id)"
                " DO UPDATE SET max_seq = s.max_seq + 1 RETURNING s.max_seq),"
                f" claim AS (INSERT INTO {sends} (conversation_id, client_msg_id, seq, claimed_at)"
                f" SELECT {p('conversation_id')}, {p('client_msg_id')}, max_seq,"
                f" CAST({p('at')} AS bigint) FROM counter),"
                f" stored AS (INSERT INTO {messages} (conversation_id, {names})"
                f" SELECT {p('conversation_id')}, max_seq, {values} FROM counter)"
                " SELECT max_seq FROM counter"
            ]
        upsert = (
            "ON DUPLICATE KEY UPDATE max_seq = max_seq + 1"
            if self.kind == "mysql"
            else "ON CONFLICT (conversation_id) DO UPDATE SET max_seq = max_seq + 1"
        )
        return [
            f"INSERT INTO {seqs} (conversation_id, max_seq, min_seq)"
            f" VALUES ({p('conversation_id')}, 1, 0) {upsert} RETURNING max_seq",
            f"INSERT INTO {sends} (conversation_id, client_msg_id, seq, claimed_at)"
            f" VALUES ({p('conversation_id')}, {p('client_msg_id')}, {p('seq')}, {p('at')})",
            f"INSERT INTO {messages} (conversation_id, {names}) VALUES"
            f" ({p('conversation_id')}, {', '.join(p(c) for c in ['seq', *columns])})",
        ]


# The slot-level columns the row takes its defaults for.
_FLAGS = frozenset({"conversation_id", "is_read", "purged", *(
    "revoked_by", "revoke_role", "revoke_nickname", "revoke_time")})  # fmt: skip


def _placeholder(kind: str) -> Any:
    """The DBAPI's named placeholder of the engine (sqlite3 ``:x``, the others ``%(x)s``)."""
    if kind == "sqlite":
        return lambda name: f":{name}"
    return lambda name: f"%({name})s"
