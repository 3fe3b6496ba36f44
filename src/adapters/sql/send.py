"""A fresh send's claims and seqs on SQL in one step (``FreshSends``; docs/sending.md).

Every client_msg_id is claimed with a plain INSERT (no upsert): a claim already there, live
or expired, is a unique-key violation that undoes the whole step and sends the service down
the general path, which knows what to do with it. The counter is taken first, then the
claims, as ``SqlSeqStore.allocate_sends`` takes them, so the two never deadlock.

- PostgreSQL: one data-modifying CTE (autocommitted): the counter upsert, whose
  ``RETURNING`` gives the first seq, and the claims inserted from it; for ``store_fresh``
  on a store that offers its messages' INSERT (``FreshRows``: sql-row's rows, sql-bucket's
  buckets), that INSERT too.
- SQLite: one INSERT of the claims (autocommitted), each seq read from the counter in the
  statement (under the file's write lock, so no other writer moves it); the schema's
  trigger on the claims table raises max_seq to each claim's seq.
- MariaDB: one transaction: the counter upsert with ``RETURNING``, then the claims in one
  multi-row INSERT.

``store_fresh`` runs the same step and then the caller's insert: on SQLite and MariaDB in
one transaction (joined: the store's statements run on the step's connection), so a fresh
send commits once; on PostgreSQL in the step's statement when it can (``_in_one_statement``),
else each autocommitted (see ``_claim_then_store``).

The statements are compiled once per store and bound per call (``prepared``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson
from sqlalchemy import ClauseElement, Connection, bindparam, text
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import IntegrityError

from imbucket.adapters.sql.engine import Database, on_cursor
from imbucket.adapters.sql.prepared import Prepared, PreparedRows, row_binds
from imbucket.adapters.sql.schema import Schema, check_key, check_keys
from imbucket.domain import sending
from imbucket.domain.errors import ImbucketError
from imbucket.domain.model import InsertResult, Message

Insert = Callable[[str, list[Message]], InsertResult]


class _Claimed(Exception):
    """A client_msg_id of the batch has a claim already: the step is undone."""


class FreshRows(Protocol):
    """A store whose fresh messages' INSERT can ride in the step's statement.

    The encoding stays the store's (sql-row's rows, sql-bucket's buckets): it gives the
    INSERT's text and its values, and the step composes them with its counter and claims.
    """

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """The store's own insert (``MessageStore.insert``)."""
        ...

    def fresh_insert(self, base: str, single: bool = False) -> str:
        """The INSERT of messages numbered from base (single: of exactly one)."""
        ...

    def fresh_binds(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> dict[str, Any] | None:
        """Its values, or None when they do not fit one statement."""
        ...

    def fresh_rows(self, first: int, count: int) -> int:
        """How many rows the INSERT returns when it stores all count messages from seq first."""
        ...


class SqlFreshSends:
    """``FreshSends`` over a schema's counters and claims tables.

    rows: the store whose messages a fresh send on PostgreSQL inserts in the step's
    statement (none: the step, then the caller's insert).
    """

    def __init__(self, db: Database, schema: Schema, rows: FreshRows | None = None) -> None:
        self.db = db
        dialect = db.engine.dialect
        self._statement = Prepared(_statement(db, schema), dialect)
        self._rows = rows if db.kind == "postgresql" else None
        self._storing: dict[bool, Prepared] = {}  # by whether it stores a single message
        if self._rows is not None:
            for single in (False, True):
                storing = _storing_statement(schema, self._rows, single)
                self._storing[single] = Prepared(storing, dialect)
        table = schema.sends

        def claims(count: int) -> ClauseElement:
            return table.insert().values(
                [
                    {
                        "conversation_id": bindparam(f"conversation_id_{i}"),
                        "client_msg_id": bindparam(f"client_msg_id_{i}"),
                        "seq": bindparam(f"seq_{i}"),
                        "claimed_at": bindparam(f"at_{i}"),
                    }
                    for i in range(count)
                ]
            )

        self._prepared_claims = PreparedRows(claims, dialect)
        self._insert_claims = table.insert().values(
            conversation_id=bindparam("conversation_id"),
            client_msg_id=bindparam("client_msg_id"),
            seq=bindparam("seq"),
            claimed_at=bindparam("at"),
        )

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        """See ``imbucket.ports.fresh_sends.FreshSends.claim_fresh``.

        since is not needed: a SQL claim expires by its claimed_at alone.
        """
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

    def store_fresh(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        at: int,
        insert: Insert,
        store_insert: Insert | None = None,
        since: int = 0,
    ) -> int | None:
        """See ``imbucket.ports.fresh_sends.StoringFreshSends.store_fresh``.

        since is not needed: a SQL claim expires by its claimed_at alone.
        """
        check_keys(conversation_id)
        ids = [check_key(m.client_msg_id, "client_msg_id") for m in messages]
        if not ids or self.db.in_batch:
            return None
        if self.db.kind == "postgresql":
            binds = self._fresh_binds(conversation_id, messages, store_insert)
            if binds is not None:
                outcome = self._in_one_statement(conversation_id, ids, at, binds)
                if outcome is None or outcome[1]:
                    return None if outcome is None else outcome[0]
                # A seq's place was taken: the claims and seqs stand, as after the step.
                return self._store_claimed(conversation_id, messages, outcome[0], insert)
            return self._claim_then_store(conversation_id, ids, messages, at, insert)
        step = functools.partial(self._claim_and_store, conversation_id, ids, messages, at, insert)
        try:
            first, refused = self.db.run(step, atomic=True, idempotent=True, joined=True)
        except _Claimed:
            return None
        if refused is not None:
            raise refused  # after the commit of what the insert kept (see the port)
        return first

    def _fresh_binds(
        self, conversation_id: str, messages: Sequence[Message], store_insert: Insert | None
    ) -> dict[str, Any] | None:
        """The rows' values for the one-statement send, or None to take two statements.

        Only when the caller's insert runs the insert of the store the statement writes to,
        undecorated (no cache invalidating behind it, no other store): the statement then
        writes what that insert would. And only when the rows fit one statement: otherwise
        the store's insert splits them, or refuses a value before anything is sent, and the
        caller gives the claimed seqs up (a refusal the engine returns for the statement
        undoes it whole instead: the general path claims again, is refused, and does so).
        """
        rows = self._rows
        if rows is None or store_insert is None:
            return None
        if not _is_own_insert(store_insert, rows):
            return None
        return rows.fresh_binds(conversation_id, messages)

    def _in_one_statement(
        self, conversation_id: str, ids: list[str], at: int, binds: dict[str, Any]
    ) -> tuple[int, bool] | None:
        """PostgreSQL: the counter, the claims and the messages in one autocommitted statement.

        The first seq and whether every message was stored; None when a client_msg_id has
        a claim (the statement is undone whole). A message is not stored when its seq's
        place was taken already (a row, or a slot holding a message or purged, in a bucket
        the statement then leaves as it was): the claims and seqs stay, as after the step
        of ``_claim_then_store``.
        """
        statement = self._storing[len(ids) == 1]  # set whenever _fresh_binds gives binds
        params = {"conversation_id": conversation_id, "n": len(ids), "ids": ids, "at": at}
        bound = statement.params({**params, **binds})

        def step(connection: Connection) -> tuple[int, int]:
            try:
                ((base, stored),) = on_cursor(connection, statement.sql, bound).rows
            except IntegrityError:
                raise _Claimed from None
            return int(base), int(stored)

        try:
            base, stored = self.db.run(step, idempotent=True)
        except _Claimed:
            return None
        assert self._rows is not None  # as the statement
        return base + 1, stored == self._rows.fresh_rows(base + 1, len(ids))

    def _claim_then_store(
        self,
        conversation_id: str,
        ids: list[str],
        messages: Sequence[Message],
        at: int,
        insert: Insert,
    ) -> int | None:
        """PostgreSQL: the step, then the insert, each autocommitted (two commits).

        A transaction around both would hold the conversation's counter across four round
        trips (BEGIN, the step, the insert, COMMIT), and concurrent sends of the conversation
        would queue behind it. The claims stay when the insert fails, as after
        ``claim_fresh``: the general path finds them.
        """
        seqs = self.claim_fresh(conversation_id, ids, at)
        if seqs is None:
            return None
        return self._store_claimed(conversation_id, messages, seqs[ids[0]], insert)

    def _store_claimed(
        self, conversation_id: str, messages: Sequence[Message], first: int, insert: Insert
    ) -> int | None:
        """Insert messages at their claimed seqs from first; None unless all were stored.

        What the insert does not store, the general path finds claimed and settles.
        """
        inserted = insert(conversation_id, sending.numbered(messages, first)).inserted
        return first if len(inserted) == len(messages) else None

    def _claim_and_store(
        self,
        conversation_id: str,
        ids: list[str],
        messages: Sequence[Message],
        at: int,
        insert: Insert,
        connection: Connection,
    ) -> tuple[int, ImbucketError | None]:
        """The step, then the insert joining its transaction; the first seq and a refusal."""
        try:
            first = self._claim(connection, conversation_id, ids, at)
        except IntegrityError:
            raise _Claimed from None
        try:
            result = insert(conversation_id, sending.numbered(messages, first))
        except ImbucketError as failed:
            # The insert's own verdict (a driver's error would have ended the transaction):
            # what it kept is committed, as if the step and the insert were two transactions.
            return first, failed
        if len(result.inserted) != len(ids):
            raise _Claimed  # a seq held something already: the general path settles it
        return first, None

    def _claim(self, connection: Connection, conversation_id: str, ids: list[str], at: int) -> int:
        """Claim ids and allocate their seqs on connection; the first seq.

        The statements run prepared, on the connection's cursor (``prepared``).
        """
        n = len(ids)
        statement = self._statement
        if self.db.kind == "postgresql":
            params = {"conversation_id": conversation_id, "n": n, "ids": ids, "at": at}
            (row,) = on_cursor(connection, statement.sql, statement.params(params)).rows
            return int(row[0]) + 1
        if self.db.kind == "sqlite":
            params = {
                "conversation_id": conversation_id,
                "ids": orjson.dumps(ids).decode(),
                "at": at,
            }
            found = on_cursor(connection, statement.sql, statement.params(params)).rows
            return min(int(row[0]) for row in found)
        params = {"conversation_id": conversation_id, "n": n}
        (last,) = on_cursor(connection, statement.sql, statement.params(params)).rows
        first = int(last[0]) - n + 1
        rows = [
            {"conversation_id": conversation_id, "client_msg_id": cid, "seq": seq, "at": at}
            for seq, cid in enumerate(ids, first)
        ]
        claims = self._prepared_claims.get(n)
        if claims is None:
            connection.execute(self._insert_claims, rows)
        else:
            on_cursor(connection, claims.sql, claims.params(row_binds(rows)))
        return first


def _statement(db: Database, schema: Schema) -> ClauseElement:
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
    returning: ClauseElement = upsert.returning(table.c.max_seq)
    return returning


def _is_own_insert(store_insert: Insert, rows: FreshRows) -> bool:
    """Whether store_insert is rows' own insert method, bound to rows, not replaced."""
    bound_to = getattr(store_insert, "__self__", None)
    method = getattr(store_insert, "__func__", None)
    return bound_to is rows and method is getattr(type(rows), "insert", None)


def _storing_statement(schema: Schema, rows: FreshRows, single: bool) -> ClauseElement:
    """PostgreSQL: the step's CTEs and the store's INSERT of the messages, numbered from base.

    single: the text for exactly one message. Returns the base and how many rows the INSERT
    wrote.
    """
    stored = rows.fresh_insert("(SELECT base FROM counter)", single)
    return text(
        f"{_counter_and_claims(schema.seqs.name, schema.sends.name)}, stored AS ({stored})"
        " SELECT base, (SELECT count(*) FROM stored) FROM counter"
    )


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
