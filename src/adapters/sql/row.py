"""sql-row: one row per seq (PRIMARY KEY conversation_id, seq) plus per-user tag rows.

A row exists once a seq holds anything: a message, a revoke, is_read or the purged mark; a
tag-only row has NULL message columns until its message lands. Who deleted a seq lives in
the deletions table and who read it before its message was stored in the readers table,
both keyed by (conversation_id, seq, user_id), so a repeated set-add hits the key and
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    Table,
    and_,
    case,
    cast,
    delete,
    func,
    literal_column,
    null,
    select,
    tuple_,
    union,
    union_all,
    update,
)
from sqlalchemy.engine import Engine, Row

from adapters import contention
from adapters.codec import message_from_doc, message_to_doc
from adapters.sql.engine import Database
from adapters.sql.schema import RowSchema, check_keys, ensure_schema
from adapters.sql.sizing import batches, row_bytes
from adapters.sql.stats import footprint
from domain.errors import StoreUnavailable
from domain.layout import BucketLayout
from domain.model import (
    EMPTY_SLOT,
    MESSAGE_FIELDS,
    OTHER_DELETERS,
    PURGED_SLOT,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Role,
    Slot,
    StoreStats,
)
from domain.scan import ScannedSlot, SlotPage
from domain.tags import MAX_ROUNDS, Decision, TagWrites, classify, deleting_for

_MESSAGE = 0
_DELETION = 1
_READER = 2


class SqlRowStore(TagWrites):
    """MessageStore with one row per message on SQLite, PostgreSQL or MariaDB."""

    def __init__(self, db: Database, layout: BucketLayout, schema: RowSchema) -> None:
        ensure_schema(db, schema, layout)
        self.db = db
        self.layout = layout
        self.schema = schema
        self._messages = schema.messages
        db.limits()  # asked at open, so that no insert pays the round trip

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for instrumentation such as round-trip counting)."""
        return self.db.engine

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store messages; see MessageStore.insert."""
        check_keys(conversation_id)
        pending = {m.seq: m for m in sorted(messages, key=lambda m: m.seq)}
        outcome: dict[int, InsertOutcome] = {}
        for _ in range(MAX_ROUNDS):
            for chunk in self._statements(conversation_id, list(pending.values())):
                for seq in self._insert_new(chunk):
                    outcome[seq] = InsertOutcome.INSERTED
                    del pending[seq]
            if pending:
                self._settle(conversation_id, pending, outcome)
            if not pending:
                break
        else:
            raise StoreUnavailable(f"insert into {conversation_id} did not settle")
        return InsertResult.of(messages, outcome)

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Read slots holding anything, in one statement; see MessageStore.get.

        For a viewer the deletions come back as one row per seq: the viewer's id when the
        viewer is among them, else OTHER_DELETERS (``''``, which sorts before every id).
        """
        check_keys(conversation_id)
        if not seqs:
            return {}
        schema = self.schema
        width = len(_ROW_COLUMNS)
        tags = [
            select(
                literal_column(str(kind)).label("kind"),
                table.c.seq,
                table.c.user_id,
                *(null() for _ in range(width)),
            ).where(_at(table, conversation_id, seqs))
            for kind, table in ((_DELETION, schema.deletions), (_READER, schema.readers))
        ]
        if viewer is not None:
            deletions = schema.deletions.c
            mine = case((deletions.user_id == viewer, deletions.user_id), else_=OTHER_DELETERS)
            tags[0] = (
                select(
                    literal_column(str(_DELETION)).label("kind"),
                    deletions.seq,
                    func.max(mine).label("user_id"),
                    *(null() for _ in range(width)),
                )
                .where(_at(schema.deletions, conversation_id, seqs))
                .group_by(deletions.seq)
            )
        messages = select(
            literal_column(str(_MESSAGE)).label("kind"),
            self._messages.c.seq,
            cast(null(), String).label("user_id"),
            *(self._messages.c[name] for name in _ROW_COLUMNS),
        ).where(_at(self._messages, conversation_id, seqs))
        rows = self.db.execute(union_all(messages, *tags)).rows
        return _slots(conversation_id, rows)

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record a revoke; see MessageStore.revoke."""
        check_keys(conversation_id)
        values = {
            "revoked_by": revoke.user_id,
            "revoke_role": int(revoke.role),
            "revoke_nickname": revoke.nickname,
            "revoke_time": revoke.time,
        }
        table = self._messages
        revoke_row = (
            update(table)
            .where(
                _at(table, conversation_id, [seq]),
                table.c.revoked_by.is_(None),
                table.c.purged.is_(False),
            )
            .values(values)
        )
        if self.db.execute(revoke_row).rowcount:
            return True
        new_row = self.db.insert_ignore(table).values(
            conversation_id=conversation_id, seq=seq, **values
        )
        if self.db.execute(new_row).rowcount:
            return True
        # The row exists (rows are never deleted), so this update settles it.
        return self.db.execute(revoke_row).rowcount > 0

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """Slots in (conversation_id, seq) order; see MessageStore.scan.

        One statement finds the page's keys in the three tables (a key range scan of each),
        then one ``get`` per conversation on the page reads its slots.
        """
        start = None if after is None else tuple(json.loads(after))
        keys = [(row[0], int(row[1])) for row in self.db.execute(self._keys(start, limit)).rows]
        by_conversation: dict[str, list[int]] = {}
        for conversation_id, seq in keys:
            by_conversation.setdefault(conversation_id, []).append(seq)
        scanned: list[ScannedSlot] = []
        for conversation_id, seqs in by_conversation.items():
            found = self.get(conversation_id, seqs)
            scanned += [ScannedSlot(conversation_id, s, found[s]) for s in seqs if s in found]
        cursor = json.dumps(list(keys[-1])) if len(keys) == limit else None
        return SlotPage(tuple(scanned), cursor)

    def _keys(self, start: tuple[Any, ...] | None, limit: int) -> Select[Any]:
        """The first ``limit`` (conversation_id, seq) keys after start held by any table."""
        parts = []
        for table in (self._messages, self.schema.deletions, self.schema.readers):
            key = (table.c.conversation_id, table.c.seq)
            part = select(*key).order_by(*key).limit(limit)
            if start is not None:
                part = part.where(tuple_(*key) > tuple_(*start))
            parts.append(select(part.subquery()))
        keys = union(*parts).subquery()
        return select(keys.c.conversation_id, keys.c.seq).order_by(*keys.c).limit(limit)

    def stats(self) -> StoreStats:
        """Exact message and row counts, bytes from the engine's catalog."""
        table = self._messages
        counts = select(func.count(table.c.send_id), func.count())
        messages, rows = self.db.execute(counts).rows[0]
        size = footprint(self.db, self.schema.data_tables())
        return StoreStats(int(messages), int(rows), size.data_bytes, size.index_bytes)

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.db.close()

    def delete_for(self, conversation_id: str, seqs: Sequence[int], user_id: str) -> int:
        """Set-add user_id to the deletions of seqs that are not purged; see MessageStore.

        Reads only the message rows, not every deleter: the rule sees slots without their
        deleters, the primary key of the deletions makes the insert a set-add, and its row
        count says how many were new. So a message deleted by thousands costs each deleter
        two statements, not a read of all the others.
        """
        check_keys(conversation_id, user_id)
        decide = deleting_for(user_id)
        rows = self._state(conversation_id, seqs)
        patches = {seq: decide(_row_slot(conversation_id, rows.get(seq))) for seq in seqs}
        deleters = {
            seq: patch.add_deleted_by for seq, patch in patches.items() if patch is not None
        }
        return self._add_marks(self.schema.deletions, conversation_id, deleters)

    def _patch(self, conversation_id: str, seqs: Sequence[int], decide: Decision) -> int:
        """Read the slots in one statement, then write each kind of change in one more."""
        check_keys(conversation_id)
        slots = self.get(conversation_id, seqs) if seqs else {}
        changes = {seq: decide(slots.get(seq, EMPTY_SLOT)) for seq in seqs}
        patches = {seq: patch for seq, patch in changes.items() if patch is not None}
        purge = [seq for seq, patch in patches.items() if patch.purge]
        changed = self._purge(conversation_id, purge) if purge else 0
        tags = {seq: patch for seq, patch in patches.items() if not patch.purge}  # purge wins
        deleters = {seq: patch.add_deleted_by for seq, patch in tags.items()}
        readers = {seq: patch.add_read_by for seq, patch in tags.items()}
        changed += self._add_marks(self.schema.deletions, conversation_id, deleters)
        changed += self._add_marks(self.schema.readers, conversation_id, readers)
        read = [seq for seq, patch in tags.items() if patch.set_read]
        if read:
            table = self._messages
            mark = (
                update(table)
                .where(
                    _at(table, conversation_id, read),
                    table.c.is_read.is_(False),
                    table.c.purged.is_(False),
                )
                .values(is_read=True)
            )
            changed += self.db.execute(mark).rowcount
        return changed

    def _purge(self, conversation_id: str, seqs: Sequence[int]) -> int:
        """Purge rows: new purged rows where none exist, wipe the others; drop their marks."""
        table = self._messages
        new_rows = (
            self.db.insert_ignore(table)
            .values([{"conversation_id": conversation_id, "seq": s, "purged": True} for s in seqs])
            .returning(table.c.seq)
        )
        created = {row.seq for row in self.db.execute(new_rows).rows}
        existing = [seq for seq in seqs if seq not in created]
        purged = len(created)
        if existing:  # these rows exist now (rows are never deleted), so the wipe settles them
            wipe = (
                update(table)
                .where(_at(table, conversation_id, existing), table.c.purged.is_(False))
                .values({**dict.fromkeys(_WIPED), "is_read": False, "purged": True})
            )
            purged += self.db.execute(wipe).rowcount
        for marks in (self.schema.deletions, self.schema.readers):
            self.db.execute(delete(marks).where(_at(marks, conversation_id, seqs)))
        return purged

    def _statements(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> Iterator[Sequence[dict[str, Any]]]:
        """The rows of messages in INSERTs that fit the server's limits (docs/sql.md)."""
        rows = [_message_row(conversation_id, m) for m in messages]
        sizes = [row_bytes(row) for row in rows]
        return batches(rows, sizes, len(_MESSAGE_COLUMNS) + 2, self.db.limits())

    def _insert_new(self, rows: Sequence[dict[str, Any]]) -> set[int]:
        """INSERT message rows for seqs that have none yet; returns the seqs inserted."""
        table = self._messages
        statement = self.db.insert_ignore(table).values(list(rows)).returning(table.c.seq)
        return {row.seq for row in self.db.execute(statement).rows}

    def _settle(
        self, conversation_id: str, pending: dict[int, Message], outcome: dict[int, InsertOutcome]
    ) -> None:
        """Classify pending seqs whose row exists; fill tag-only rows with their message."""
        for seq, row in self._state(conversation_id, list(pending)).items():
            kind = classify(_slot(conversation_id, row), pending[seq])
            if kind is None:  # a tag-only row: its message goes in unless another writer won
                if not self._fill(conversation_id, pending[seq]):
                    contention.record(contention.ROW_UPSERT_LOST)
                    continue
                kind = InsertOutcome.INSERTED
            outcome[seq] = kind
            del pending[seq]

    def _fill(self, conversation_id: str, message: Message) -> bool:
        """Put message into its tag-only row iff the row still has no message and is not purged."""
        table = self._messages
        row = _message_row(conversation_id, message)
        fill = (
            update(table)
            .where(
                _at(table, conversation_id, [message.seq]),
                table.c.send_id.is_(None),
                table.c.purged.is_(False),
            )
            .values({name: row[name] for name in _MESSAGE_COLUMNS})
        )
        return self.db.execute(fill).rowcount == 1

    def _state(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Row[Any]]:
        """The message rows of seqs (without deleters and readers), by seq."""
        if not seqs:
            return {}
        table = self._messages
        query: Select[Any] = select(table.c.seq, *(table.c[name] for name in _ROW_COLUMNS)).where(
            _at(table, conversation_id, seqs)
        )
        return {row.seq: row for row in self.db.execute(query).rows}

    def _add_marks(
        self, marks: Table, conversation_id: str, users: Mapping[int, str | None]
    ) -> int:
        """Set-add each seq's user to the marks table; returns how many were new."""
        rows = [
            {"conversation_id": conversation_id, "seq": seq, "user_id": user}
            for seq, user in users.items()
            if user is not None
        ]
        if not rows:
            return 0
        return self.db.execute(self.db.insert_ignore(marks).values(rows)).rowcount


_MESSAGE_COLUMNS = tuple(name for name in MESSAGE_FIELDS if name != "seq")
_REVOKE_COLUMNS = ("revoked_by", "revoke_role", "revoke_nickname", "revoke_time")
_ROW_COLUMNS = (*_MESSAGE_COLUMNS, *_REVOKE_COLUMNS, "is_read", "purged")
_WIPED = (*_MESSAGE_COLUMNS, *_REVOKE_COLUMNS)


def _at(table: Table, conversation_id: str, seqs: Sequence[int]) -> ColumnElement[bool]:
    """Rows of seqs in the conversation: a range when they are consecutive, else IN."""
    first, last = min(seqs), max(seqs)
    if last - first + 1 == len(set(seqs)):
        where = table.c.seq.between(first, last) if first != last else table.c.seq == first
    else:
        where = table.c.seq.in_(sorted(set(seqs)))
    return and_(table.c.conversation_id == conversation_id, where)


def _message_row(conversation_id: str, message: Message) -> dict[str, Any]:
    doc = message_to_doc(message)
    doc["options"] = json.dumps(doc["options"], sort_keys=True)
    return {"conversation_id": conversation_id, **doc}


def _message(conversation_id: str, row: Row[Any]) -> Message | None:
    """The message a row holds, or None for a tag-only or purged row."""
    if row.send_id is None:
        return None
    doc = {name: getattr(row, name) for name in MESSAGE_FIELDS}
    doc["options"] = json.loads(doc["options"]) if doc["options"] else {}
    return message_from_doc(conversation_id, doc)


def _row_slot(conversation_id: str, row: Row[Any] | None) -> Slot:
    """The slot of a message row alone, empty when there is no row."""
    return EMPTY_SLOT if row is None else _slot(conversation_id, row)


def _slot(conversation_id: str, row: Row[Any]) -> Slot:
    """The slot of a message row alone (its deleters and readers are not read here)."""
    if row.purged:
        return PURGED_SLOT
    return Slot(_message(conversation_id, row), _revoke(row), is_read=bool(row.is_read))


def _revoke(row: Row[Any]) -> Revoke | None:
    if row.revoked_by is None:
        return None
    return Revoke(row.revoked_by, Role(row.revoke_role), row.revoke_nickname, row.revoke_time)


def _slots(conversation_id: str, rows: Sequence[Row[Any]]) -> dict[int, Slot]:
    """Assemble slots from the UNION of message rows, deleter rows and reader rows."""
    found: dict[int, Row[Any]] = {}
    users: dict[tuple[int, int], set[str]] = {}
    for row in rows:
        if row.kind == _MESSAGE:
            found[row.seq] = row
        else:
            users.setdefault((row.kind, row.seq), set()).add(row.user_id)
    slots: dict[int, Slot] = {}
    for seq in {*found, *(seq for _, seq in users)}:
        stored = found.get(seq)
        slot = EMPTY_SLOT if stored is None else _slot(conversation_id, stored)
        if not slot.purged:  # a deleter racing the purge may be left over: ignore it
            slot = replace(
                slot,
                deleted_by=frozenset(users.get((_DELETION, seq), ())),
                read_by=frozenset(users.get((_READER, seq), ())),
            )
        if not slot.is_empty:
            slots[seq] = slot
    return slots
