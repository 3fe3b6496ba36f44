"""SqlSeqStore: seq counters and watermarks in two tables, every change one upsert.

PostgreSQL and SQLite return the new value from the upsert itself (``RETURNING``). MariaDB
has no RETURNING on the update branch of an upsert, so there the upsert and the read of the
new value run in one transaction: the upsert's row lock keeps other writers out until
COMMIT, so the value read is the one this call produced.

The seqs send recorded per client_msg_id live in a third table (``…_sends``); a claim is
an insert that keeps the row already there, and a send claims, allocates and records in one
transaction (``allocate_sends``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import astuple
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Executable,
    Table,
    and_,
    bindparam,
    case,
    column,
    delete,
    func,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.selectable import TextualSelect

from imbucket.adapters.sql.bulk_rows import HeldRead, write_rows
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.schema import Schema, check_key, check_keys
from imbucket.adapters.sql.stats import footprint
from imbucket.domain.model import TableStats, Watermarks
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs

R = TypeVar("R", Counters, UserSeqs, SendClaim)
# An upsert's statements: the write, and on MariaDB for an allocation the read after it.
_Upsert = tuple[Executable, Executable | None]
# The seq of a claim whose transaction has not allocated yet (seqs start at 1): never
# committed, since the transaction that writes it writes the real seq before COMMIT.
UNALLOCATED = 0


class SqlSeqStore:
    """SeqStore over the ``…_seqs`` and ``…_user_seqs`` tables of a schema."""

    def __init__(self, db: Database, schema: Schema) -> None:
        self.db = db
        self._seqs = schema.seqs
        self._users = schema.user_seqs
        self._sends = schema.sends
        self.schema = schema
        self._watermarks = watermarks_query(schema)
        self._upserts: dict[tuple[str, str, bool], _Upsert] = {}
        self._bulk = _CounterBulkLoad(db, schema)

    def load_new_counters(self, rows: Sequence[Counters]) -> set[str]:
        """Counter rows of conversations with none yet, by the engine's bulk path.

        See ports.bulk_load.BulkCounterLoad.
        """
        return self._bulk.load_new_counters(rows)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (shared with the message store)."""
        return self.db.engine

    def allocate(self, conversation_id: str, n: int) -> int:
        """Reserve n consecutive seqs in one atomic upsert; returns the first.

        Never repeated after a lost connection (a second upsert would allocate again):
        OutcomeUnknown then, and the seqs it may have taken are a gap, never reused.
        """
        check_keys(conversation_id)
        last = self._upsert(
            self._seqs, {"conversation_id": conversation_id}, "max_seq", n, adding=True
        )
        return last - n + 1

    def max_seq(self, conversation_id: str) -> int:
        """Highest allocated seq."""
        return self._get(self._seqs, {"conversation_id": conversation_id}, "max_seq")

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise max_seq."""
        return self._raise(self._seqs, {"conversation_id": conversation_id}, "max_seq", seq)

    def min_seq(self, conversation_id: str) -> int:
        """Conversation floor."""
        return self._get(self._seqs, {"conversation_id": conversation_id}, "min_seq")

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Raise the conversation floor."""
        return self._raise(self._seqs, {"conversation_id": conversation_id}, "min_seq", seq)

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """User floor."""
        return self._get(self._users, _user(conversation_id, user_id), "min_seq")

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user floor in one write."""
        return self._raise(self._users, _user(conversation_id, user_id), "min_seq", seq)

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """User read seq."""
        return self._get(self._users, _user(conversation_id, user_id), "read_seq")

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user read seq."""
        return self._raise(self._users, _user(conversation_id, user_id), "read_seq", seq)

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """Recorded seqs of the client_msg_ids that have one, claimed at since or later."""
        wanted = _client_keys(conversation_id, client_msg_ids)
        if not wanted:
            return {}
        found = self.db.execute(self._select_sends(conversation_id, wanted, since)).rows
        return {cid: int(seq) for cid, seq in found}

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Record the claims of client_msg_ids without a live seq; return every recorded seq.

        One statement (MariaDB: two), see ``_claim``.
        """
        wanted = _client_keys(conversation_id, list(claims))
        if not wanted:
            return {}
        found = self.db.run(
            lambda connection: self._claim(connection, conversation_id, claims, at, since)
        )
        return {cid: int(seq) for cid, seq in found.items()}

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Claim, allocate and record in one transaction; return the seq of every id.

        The counter's row is locked first (an upsert adding nothing; SQLite's BEGIN
        IMMEDIATE locks the file), as ``SqlFreshSends`` takes it, so a concurrent send of
        the conversation waits for this COMMIT. The claims go in next, with no seq yet (0):
        an id claimed by a concurrent call makes this one read its seq. Then the counter is
        raised for the ids this call claimed and their seqs are written, and everything
        commits together. The counter, then the claims in client_msg_id order: two calls
        never deadlock. A transaction cut short rolls back whole: no claim without a seq,
        no seq without a claim, so running it again is safe. Round trips: BEGIN, the lock
        (not on SQLite), the claim (MariaDB: and its read), the allocation (MariaDB: and
        its read), the seqs' UPDATE, COMMIT.
        """
        wanted = _client_keys(conversation_id, client_msg_ids)
        if not wanted:
            return {}

        def claim_allocate_record(connection: Connection) -> dict[str, int]:
            self._lock_counter(connection, conversation_id)
            claims = dict.fromkeys(wanted, UNALLOCATED)
            found = self._claim(connection, conversation_id, claims, at, since)
            fresh = [cid for cid in wanted if found[cid] == UNALLOCATED]
            if fresh:
                last = self._allocate_on(connection, conversation_id, len(fresh))
                seqs = {cid: last - len(fresh) + 1 + offset for offset, cid in enumerate(fresh)}
                connection.execute(self._record(conversation_id, seqs))
                found.update(seqs)
            return found

        return self.db.run(claim_allocate_record, atomic=True)

    def _claim(
        self,
        connection: Connection,
        conversation_id: str,
        claims: Mapping[str, int],
        at: int,
        since: int,
    ) -> dict[str, int]:
        """Record the claims of client_msg_ids without a live seq; every recorded seq.

        PostgreSQL and SQLite: one ``INSERT … ON CONFLICT DO UPDATE … RETURNING``, whose
        update branch keeps a live row as it is (or replaces an expired one) and returns the
        row that won (even one committed after the statement began). MariaDB: ``INSERT … ON
        DUPLICATE KEY UPDATE`` the same way, then a SELECT, in the caller's transaction; the
        insert waits for a concurrent claim of the same key to commit, so the SELECT sees
        it. Rows go in client_msg_id order, so two overlapping claims never deadlock.
        """
        table = self._sends
        rows = [
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "seq": claims[cid],
                "claimed_at": at,
            }
            for cid in sorted(claims)
        ]
        expired = table.c.claimed_at < since

        def kept(column: Any, incoming: Any) -> Any:
            return case((expired, incoming), else_=column)

        if self.db.kind == "mariadb":
            upsert = mysql.insert(table).values(rows)
            # MariaDB assigns left to right: seq must be decided before claimed_at changes.
            claim = upsert.on_duplicate_key_update(
                [
                    ("seq", kept(table.c.seq, upsert.inserted.seq)),
                    ("claimed_at", kept(table.c.claimed_at, upsert.inserted.claimed_at)),
                ]
            )
            connection.execute(claim)
            found = connection.execute(self._select_sends(conversation_id, list(claims))).all()
        else:
            dialect = postgresql if self.db.kind == "postgresql" else sqlite
            statement = dialect.insert(table).values(rows)
            statement = statement.on_conflict_do_update(
                index_elements=["conversation_id", "client_msg_id"],
                set_={
                    "seq": kept(table.c.seq, statement.excluded.seq),
                    "claimed_at": kept(table.c.claimed_at, statement.excluded.claimed_at),
                },
            ).returning(table.c.client_msg_id, table.c.seq)
            found = connection.execute(statement).all()
        return {cid: int(seq) for cid, seq in found}

    def _lock_counter(self, connection: Connection, conversation_id: str) -> None:
        """Lock the conversation's counter row until COMMIT (creating it at 0 if absent)."""
        if self.db.kind == "sqlite":
            return
        params = {"conversation_id": conversation_id, "max_seq": 0}
        upsert, _ = self._upsert_statements(self._seqs, ("conversation_id",), "max_seq", True)
        connection.execute(upsert, params)

    def _allocate_on(self, connection: Connection, conversation_id: str, n: int) -> int:
        """Raise max_seq by n on connection (in its transaction); the new max_seq."""
        params = {"conversation_id": conversation_id, "max_seq": n}
        upsert, read = self._upsert_statements(self._seqs, ("conversation_id",), "max_seq", True)
        if read is None:
            return int(connection.execute(upsert, params).scalar_one())
        connection.execute(upsert, params)
        return int(connection.execute(read, params).scalar_one())

    def _record(self, conversation_id: str, seqs: Mapping[str, int]) -> Executable:
        """The UPDATE writing the seqs of claims this transaction made."""
        table = self._sends
        return (
            update(table)
            .where(
                table.c.conversation_id == conversation_id,
                table.c.client_msg_id.in_(list(seqs)),
            )
            .values(seq=case(dict(seqs), value=table.c.client_msg_id))
        )

    def prune_sends(self, before: int, limit: int) -> int:
        """One bounded DELETE of claims recorded before before (by the claimed_at index)."""
        table = self._sends
        old = table.c.claimed_at < before
        if self.db.kind == "mariadb":
            statement = delete(table).where(old).with_dialect_options(mysql_limit=limit)
        else:
            key = tuple_(table.c.conversation_id, table.c.client_msg_id)
            oldest = select(table.c.conversation_id, table.c.client_msg_id).where(old)
            statement = delete(table).where(key.in_(oldest.limit(limit)))
        return self.db.execute(statement).rowcount

    def send_claims(self) -> TableStats:
        """Claim rows (a COUNT) and the table's bytes, data and indexes, from the catalog."""
        rows = self.db.execute(select(func.count()).select_from(self._sends)).rows[0][0]
        size = footprint(self.db, [self._sends])
        return TableStats(int(rows), size.data_bytes + size.index_bytes)

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """One SELECT in primary key order."""
        rows = self._scan(self._seqs, ("conversation_id",), ("max_seq", "min_seq"), after, limit)
        return _page([Counters(c, int(m), int(n)) for c, m, n in rows], 1, limit)

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """One SELECT in primary key order."""
        key = ("conversation_id", "user_id")
        rows = self._scan(self._users, key, ("min_seq", "read_seq"), after, limit)
        return _page([UserSeqs(c, u, int(m), int(r)) for c, u, m, r in rows], 2, limit)

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """One SELECT in primary key order."""
        key = ("conversation_id", "client_msg_id")
        rows = self._scan(self._sends, key, ("seq", "claimed_at"), after, limit)
        claims = [SendClaim(c, cid, int(seq), int(at)) for c, cid, seq, at in rows]
        return _page(claims, 2, limit)

    def _scan(
        self,
        table: Table,
        key: tuple[str, ...],
        values: tuple[str, ...],
        after: str | None,
        limit: int,
    ) -> list[Any]:
        columns = [table.c[name] for name in key]
        query = select(*columns, *(table.c[name] for name in values))
        query = query.order_by(*columns).limit(limit)
        if after is not None:
            query = query.where(tuple_(*columns) > tuple_(*json.loads(after)))
        return list(self.db.execute(query).rows)

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """One SELECT ... IN; see SeqStore.counters_of."""
        for conversation_id in conversation_ids:
            check_keys(conversation_id)
        found = {c: Counters(c, 0, 0) for c in conversation_ids}
        if conversation_ids:
            table = self._seqs
            query = select(table.c.conversation_id, table.c.max_seq, table.c.min_seq).where(
                table.c.conversation_id.in_(sorted(set(conversation_ids)))
            )
            for c, m, n in self.db.execute(query).rows:
                found[c] = Counters(c, int(m), int(n))
        return found

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """One SELECT per page of keys (by conversation); see SeqStore.user_seqs_of."""
        found = {(c, u): UserSeqs(c, u, 0, 0) for c, u in keys}
        if keys:
            for conversation_id, user_id in keys:
                check_keys(conversation_id, user_id)
            table = self._users
            by_conversation: dict[str, set[str]] = {}
            for c, u in keys:
                by_conversation.setdefault(c, set()).add(u)
            where = or_(
                *(
                    and_(table.c.conversation_id == c, table.c.user_id.in_(sorted(users)))
                    for c, users in by_conversation.items()
                )
            )
            columns = (table.c.conversation_id, table.c.user_id, table.c.min_seq, table.c.read_seq)
            for c, u, m, r in self.db.execute(select(*columns).where(where)).rows:
                if (c, u) in found:
                    found[c, u] = UserSeqs(c, u, int(m), int(r))
        return found

    def batch(self) -> AbstractContextManager[None]:
        """One transaction for the block's writes; see SeqStore.batch."""
        return self.db.batch()

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """max_seq, min_seq and the user's min_seq in one statement (built once, bound here)."""
        check_keys(conversation_id, user_id)
        params = {"conversation_id": conversation_id, "user_id": user_id}
        max_seq, min_seq, user_min_seq = self.db.execute(self._watermarks, params).rows[0]
        return Watermarks(int(max_seq), int(min_seq), int(user_min_seq))

    def close(self) -> None:
        """Dispose of the engine's connections (shared with the message store)."""
        self.db.close()

    def _select_sends(self, conversation_id: str, client_msg_ids: list[str], since: int = 0) -> Any:
        table = self._sends
        found = select(table.c.client_msg_id, table.c.seq).where(
            table.c.conversation_id == conversation_id,
            table.c.client_msg_id.in_(client_msg_ids),
        )
        return found.where(table.c.claimed_at >= since) if since else found

    def _get(self, table: Table, key: dict[str, str], column: str) -> int:
        check_keys(*key.values())
        rows = self.db.execute(select(table.c[column]).where(_matches(table, key))).rows
        return int(rows[0][0]) if rows else 0

    def _raise(self, table: Table, key: dict[str, str], column: str, value: int) -> int:
        return self._upsert(table, key, column, value, adding=False)

    def _upsert(
        self, table: Table, key: dict[str, str], column: str, value: int, *, adding: bool
    ) -> int:
        """Upsert column at key; return what is stored.

        Inserts key with column = value, or sets column to the larger of the stored value
        and value (a raise) or to their sum (adding: an allocation). A raise is idempotent
        (see Database.run); an allocation is not: run twice, it allocates twice.
        """
        check_keys(*key.values())
        params = {**key, column: value}
        upsert, read = self._upsert_statements(table, tuple(key), column, adding)
        if read is None:
            rows = self.db.execute(upsert, params, idempotent=not adding).rows
            return int(rows[0][0])

        def write_then_read(connection: Connection) -> int:
            connection.execute(upsert, params)
            return int(connection.execute(read, params).scalar_one())

        return self.db.run(write_then_read, atomic=True, idempotent=not adding)

    def _upsert_statements(
        self, table: Table, key: tuple[str, ...], column: str, adding: bool
    ) -> _Upsert:
        """The upsert of column by key, built once per store (bound by name: key, column)."""
        cached = self._upserts.get((table.name, column, adding))
        if cached is not None:
            return cached
        target = table.c[column]
        values = {name: bindparam(name, type_=table.c[name].type) for name in (*key, column)}
        found: _Upsert
        if self.db.kind == "mariadb":
            insert = mysql.insert(table).values(values)
            incoming = insert.inserted[column]
            new = target + incoming if adding else self.db.greatest(target, incoming)
            upsert = insert.on_duplicate_key_update({column: new})
            if adding:
                # An allocation: the upsert and its read in one transaction, so that a cut
                # connection rolls both back and the allocation is made again (docs/sql.md).
                matches = and_(*(table.c[name] == bindparam(name) for name in key))
                found = (upsert, select(target).where(matches))
            else:  # a raise: MariaDB returns the row as the update left it
                found = (upsert.returning(target), None)
        else:
            dialect = postgresql if self.db.kind == "postgresql" else sqlite
            statement = dialect.insert(table).values(values)
            incoming = statement.excluded[column]
            new = target + incoming if adding else self.db.greatest(target, incoming)
            upsert = statement.on_conflict_do_update(index_elements=list(key), set_={column: new})
            found = (upsert.returning(target), None)
        self._upserts[(table.name, column, adding)] = found
        return found


def watermarks_sql(schema: Schema, derived: bool = False) -> str:
    """The SELECT of max_seq, min_seq and user_min_seq (0 where no row exists), as SQL text.

    One row, bound by ``conversation_id`` and ``user_id``. The seq store runs it alone; the
    fused pull reads (``SqlRowRepository.view``, ``SqlBucketRepository.view``) join it as a
    derived table, so that the watermarks travel in the statement that reads the slots.
    ``derived`` ends it in ``LIMIT 1``, which keeps PostgreSQL from flattening it and probing
    the counters again at every reference to one of its columns (the bucket read refers to
    them many times, and only in filters).
    """
    seqs, users = schema.seqs.name, schema.user_seqs.name
    conversation = "conversation_id = :conversation_id"
    return (
        f"SELECT COALESCE((SELECT max_seq FROM {seqs} WHERE {conversation}), 0) AS max_seq, "
        f"COALESCE((SELECT min_seq FROM {seqs} WHERE {conversation}), 0) AS min_seq, "
        f"COALESCE((SELECT min_seq FROM {users} WHERE {conversation}"
        " AND user_id = :user_id), 0) AS user_min_seq" + (" LIMIT 1" if derived else "")
    )


def watermarks_query(schema: Schema, derived: bool = False) -> TextualSelect:
    """``watermarks_sql`` as a statement with typed columns (built once per store)."""
    columns = (column(name, BigInteger) for name in ("max_seq", "min_seq", "user_min_seq"))
    return text(watermarks_sql(schema, derived)).columns(*columns)


def _user(conversation_id: str, user_id: str) -> dict[str, str]:
    return {"conversation_id": conversation_id, "user_id": user_id}


def _client_keys(conversation_id: str, client_msg_ids: Sequence[str]) -> list[str]:
    """Distinct client_msg_ids, each checked to fit a key column."""
    check_keys(conversation_id)
    return [check_key(cid, "client_msg_id") for cid in dict.fromkeys(client_msg_ids)]


def _matches(table: Table, key: dict[str, str]) -> Any:
    return and_(*(table.c[name] == value for name, value in key.items()))


def _page(rows: list[R], width: int, limit: int) -> SeqPage[R]:
    """A page of rows; the cursor is the key (the first width fields) of the last row."""
    if len(rows) < limit:
        return SeqPage(tuple(rows), None)
    last = rows[-1]
    key = list(astuple(last)[:width])
    return SeqPage(tuple(rows), json.dumps(key))


class _CounterBulkLoad:
    """``BulkCounterLoad`` for the SQL seq store: counter rows of conversations it lacks."""

    def __init__(self, db: Database, schema: Schema) -> None:
        self.db = db
        self.seqs = schema.seqs
        self._held = HeldRead(
            db,
            lambda among: select(self.seqs.c.conversation_id).where(
                among(self.seqs.c.conversation_id, "ids")
            ),
        )

    def load_new_counters(self, rows: Sequence[Counters]) -> set[str]:
        """See ``BulkCounterLoad.load_new_counters``: one read, then the missing rows."""
        for row in rows:
            check_key(row.conversation_id, "conversation_id")
        if not rows:
            return set()

        def work(connection: Connection) -> set[str]:
            ids = [row.conversation_id for row in rows]
            held = {found[0] for found in self._held.rows(connection, {"ids": ids})}
            new = [
                (r.conversation_id, r.max_seq, r.min_seq)
                for r in rows
                if r.conversation_id not in held
            ]
            write_rows(connection, self.seqs, ("conversation_id", "max_seq", "min_seq"), new)
            return {row[0] for row in new}

        # A failed load fails the caller's batch, if any, whole (see ports.bulk_load).
        return self.db.run(work, atomic=True, savepoint=False)
