"""A fresh send's claims and seqs on SQL in one step (``FreshSends``; docs/sending.md).

Every client_msg_id is claimed with a plain INSERT (no upsert): a claim already there, live
or expired, is a unique-key violation that undoes the whole step and sends the service down
the general path, which knows what to do with it. The counter is taken first, then the
claims, as ``SqlSeqStore.allocate_sends`` takes them, so the two never deadlock.

- PostgreSQL: one data-modifying CTE (autocommitted): the counter upsert, whose
  ``RETURNING`` gives the first seq, and the claims inserted from it.
- SQLite: one INSERT of the claims (autocommitted), each seq read from the counter in the
  statement (under the file's write lock, so no other writer moves it); the schema's
  trigger on the claims table raises max_seq to each claim's seq.
- MariaDB: one transaction: the counter upsert with ``RETURNING``, then the claims in one
  multi-row INSERT.

``store_fresh`` runs the same step and stores the messages with it, so a fresh send commits
once: on PostgreSQL's sql-row in the same statement (a third CTE inserts the rows, one
array per column); elsewhere the step and then the store's own insert in one transaction
(joined: the store's statements run on the step's connection).

The statements are built once per store and bound per call.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Executable, TextClause, bindparam, text
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import IntegrityError

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row import _message_row
from imbucket.adapters.sql.row_reads import MESSAGE_COLUMNS
from imbucket.adapters.sql.schema import RowSchema, Schema, check_key, check_keys
from imbucket.domain import sending
from imbucket.domain.model import Message
from imbucket.ports.message_store import MessageStore


class _Claimed(Exception):
    """A client_msg_id of the batch has a claim already: the step is undone."""


class SqlFreshSends:
    """``FreshSends`` over a schema's counters and claims tables."""

    def __init__(self, db: Database, schema: Schema, store: MessageStore) -> None:
        self.db = db
        self.store = store
        # PostgreSQL's sql-row: the claims, the allocation and the rows in one statement.
        self._rows: RowStatement | None = None
        if db.kind == "postgresql" and isinstance(schema, RowSchema):
            self._rows = RowStatement(db, schema)
        self._statement = _statement(db, schema)
        table = schema.sends
        self._insert_claims = table.insert().values(
            conversation_id=bindparam("conversation_id"),
            client_msg_id=bindparam("client_msg_id"),
            seq=bindparam("seq"),
            claimed_at=bindparam("at"),
        )

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int
    ) -> dict[str, int] | None:
        """See ``imbucket.ports.fresh_sends.FreshSends.claim_fresh``."""
        check_keys(conversation_id)
        ids = [check_key(cid, "client_msg_id") for cid in client_msg_ids]
        if not ids:
            return {}
        if self.db.in_batch:  # a failed statement would end the batch's transaction
            return None
        atomic = self.db.kind == "mariadb"

        def claim(connection: Connection) -> int:
            try:
                return self._claim(connection, conversation_id, ids, at)
            except IntegrityError:
                raise _Claimed from None

        try:
            first = self.db.run(claim, atomic=atomic, idempotent=True)
        except _Claimed:
            return None
        return {cid: first + offset for offset, cid in enumerate(ids)}

    def store_fresh(self, conversation_id: str, messages: Sequence[Message], at: int) -> int | None:
        """See ``imbucket.ports.fresh_sends.StoringFreshSends.store_fresh``."""
        check_keys(conversation_id)
        ids = [check_key(m.client_msg_id, "client_msg_id") for m in messages]
        if not ids or self.db.in_batch:
            return None
        if self.db.kind == "postgresql" and self._rows is None:
            return self._claim_then_store(conversation_id, ids, messages, at)
        if self._rows is not None:
            work = self._rows.work(conversation_id, ids, messages, at)
        else:
            work = functools.partial(self._claim_and_store, conversation_id, ids, messages, at)

        def claim_and_store(connection: Connection) -> int:
            try:
                return work(connection)
            except IntegrityError:
                raise _Claimed from None

        one = self._rows is not None  # one statement: autocommitted
        try:
            return self.db.run(claim_and_store, atomic=not one, idempotent=True, joined=not one)
        except _Claimed:
            return None

    def _claim_then_store(
        self, conversation_id: str, ids: list[str], messages: Sequence[Message], at: int
    ) -> int | None:
        """PostgreSQL's sql-bucket: the step, then the store's insert, each autocommitted.

        A transaction around both would hold the conversation's counter across four round
        trips (BEGIN, the step, the bucket's write, COMMIT), and concurrent sends of the
        conversation would queue behind it. The claims stay when the insert fails, as after
        ``claim_fresh``: the general path finds them.
        """
        seqs = self.claim_fresh(conversation_id, ids, at)
        if seqs is None:
            return None
        first = seqs[ids[0]]
        numbered = sending.numbered(messages, first)
        if len(self.store.insert(conversation_id, numbered).inserted) != len(ids):
            return None
        return first

    def _claim_and_store(
        self,
        conversation_id: str,
        ids: list[str],
        messages: Sequence[Message],
        at: int,
        connection: Connection,
    ) -> int:
        """The step, then the store's insert joining its transaction; the first seq."""
        first = self._claim(connection, conversation_id, ids, at)
        numbered = sending.numbered(messages, first)
        if len(self.store.insert(conversation_id, numbered).inserted) != len(ids):
            raise _Claimed  # a seq held something already: the general path settles it
        return first

    def _claim(self, connection: Connection, conversation_id: str, ids: list[str], at: int) -> int:
        """Claim ids and allocate their seqs on connection; the first seq."""
        n = len(ids)
        if self.db.kind == "postgresql":
            params = {"conversation_id": conversation_id, "n": n, "ids": ids, "at": at}
            return int(connection.execute(self._statement, params).scalar_one()) + 1
        if self.db.kind == "sqlite":
            params = {"conversation_id": conversation_id, "ids": json.dumps(ids), "at": at}
            seqs = [int(row[0]) for row in connection.execute(self._statement, params)]
            return min(seqs)
        last = connection.execute(self._statement, {"conversation_id": conversation_id, "n": n})
        first = int(last.scalar_one()) - n + 1
        rows = [
            {"conversation_id": conversation_id, "client_msg_id": cid, "seq": seq, "at": at}
            for seq, cid in enumerate(ids, first)
        ]
        connection.execute(self._insert_claims, rows)
        return first


def _statement(db: Database, schema: Schema) -> TextClause | Executable:
    """The engine's first (PostgreSQL, SQLite: only) statement of a fresh claim."""
    seqs, sends = schema.seqs.name, schema.sends.name
    if db.kind == "postgresql":
        return text(f"{_counter_and_claims(seqs, sends)} SELECT base FROM counter")
    if db.kind == "sqlite":
        # The counter is read once (an uncorrelated subquery) before the trigger moves it.
        return text(
            f"INSERT INTO {sends} (conversation_id, client_msg_id, seq, claimed_at)"
            " SELECT :conversation_id, value,"
            f" COALESCE((SELECT max_seq FROM {seqs} WHERE conversation_id = :conversation_id), 0)"
            " + key + 1, :at FROM json_each(:ids) WHERE true RETURNING seq"
        )
    table = schema.seqs
    insert = mysql.insert(table).values(
        conversation_id=bindparam("conversation_id"), max_seq=bindparam("n"), min_seq=0
    )
    upsert = insert.on_duplicate_key_update({"max_seq": table.c.max_seq + insert.inserted.max_seq})
    returning: Executable = upsert.returning(table.c.max_seq)
    return returning


class RowStatement:
    """PostgreSQL's sql-row: claims, allocation and message rows in one statement.

    A plain INSERT of the rows: a seq holding a row already (tags written ahead of the
    message) is a unique-key violation too, and the general path settles it.
    """

    def __init__(self, db: Database, schema: RowSchema) -> None:
        types = {c.name: c.type.compile(db.engine.dialect) for c in schema.messages.c}
        names = ", ".join(MESSAGE_COLUMNS)
        aliases = ", ".join(f"m{n}" for n in range(len(MESSAGE_COLUMNS)))
        arrays = ", ".join(
            f"CAST(:m{n} AS {types[name]}[])" for n, name in enumerate(MESSAGE_COLUMNS)
        )
        claims = _counter_and_claims(schema.seqs.name, schema.sends.name)
        self.statement = text(
            f"{claims}, stored AS (INSERT INTO {schema.messages.name}"
            f" (conversation_id, seq, {names}) SELECT :conversation_id, counter.base + r.n,"
            f" {aliases} FROM counter, unnest({arrays}) WITH ORDINALITY AS r({aliases}, n))"
            " SELECT base FROM counter"
        )

    def work(
        self, conversation_id: str, ids: list[str], messages: Sequence[Message], at: int
    ) -> Callable[[Connection], int]:
        """The statement bound to one send, as work for ``Database.run``; the first seq."""
        rows = [_message_row(conversation_id, m) for m in messages]
        params = {"conversation_id": conversation_id, "n": len(ids), "ids": ids, "at": at}
        for n, name in enumerate(MESSAGE_COLUMNS):
            params[f"m{n}"] = [row[name] for row in rows]

        def work(connection: Connection) -> int:
            return int(connection.execute(self.statement, params).scalar_one()) + 1

        return work


def _counter_and_claims(seqs: str, sends: str) -> str:
    """PostgreSQL: the CTEs upserting the counter (``base``) and inserting the claims from it.

    ``base`` is the seq before the first one allocated.
    """
    return (
        f"WITH counter AS (INSERT INTO {seqs} AS s (conversation_id, max_seq, min_seq)"
        " VALUES (:conversation_id, CAST(:n AS bigint), 0) ON CONFLICT (conversation_id)"
        " DO UPDATE SET max_seq = s.max_seq + EXCLUDED.max_seq"
        " RETURNING s.max_seq - CAST(:n AS bigint) AS base),"
        f" claimed AS (INSERT INTO {sends} (conversation_id, client_msg_id, seq, claimed_at)"
        " SELECT :conversation_id, i.id, counter.base + i.n, CAST(:at AS bigint)"
        " FROM counter, unnest(CAST(:ids AS text[])) WITH ORDINALITY AS i(id, n))"
    )
