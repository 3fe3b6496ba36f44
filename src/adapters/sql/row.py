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
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    Table,
    and_,
    bindparam,
    cast,
    delete,
    func,
    literal_column,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.schema import ScalarElementColumnDefault

from imbucket.adapters.codec import message_to_doc
from imbucket.adapters.row import RowMessageStore
from imbucket.adapters.sql.bulk_load import RowBulkLoad
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.prepared import PreparedRows, row_binds
from imbucket.adapters.sql.read_marks import Raised, aggregated, carried_rows, raising_read_seq
from imbucket.adapters.sql.row_pages import ROW_FORM, RowPages, slots_of
from imbucket.adapters.sql.row_reads import (
    DELETION,
    MESSAGE,
    MESSAGE_COLUMNS,
    READER,
    REVOKE_COLUMNS,
    ROW_COLUMNS,
    Reads,
    bound_seqs,
    row_slot,
    row_slots,
)
from imbucket.adapters.sql.row_scan import RowScan
from imbucket.adapters.sql.schema import RowSchema, check_keys, ensure_schema, message_column
from imbucket.adapters.sql.sizing import STATEMENT_OVERHEAD, batches, row_bytes, row_bytes_at_most
from imbucket.adapters.sql.sizing import batches as batches_of
from imbucket.adapters.sql.stats import footprint
from imbucket.adapters.sql.store import SqlStore
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    Message,
    Pick,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
    Watermarks,
)
from imbucket.domain.scan import RowPage, ScannedSlot, SlotPage
from imbucket.domain.tags import Decision, Guard
from imbucket.ports.view_reads import View


class SqlRowRepository:
    """RowRepository with one row per seq on SQLite, PostgreSQL or MariaDB."""

    def __init__(self, db: Database, layout: BucketLayout, schema: RowSchema) -> None:
        ensure_schema(db, schema, layout)
        self.db = db
        self.layout = layout
        self.schema = schema
        self._messages = schema.messages
        self._reads = Reads(schema, db)
        self._scan = RowScan(db, schema)
        self._pages = RowPages(db, schema, self._scan)
        self._new_rows = PreparedRows(self._inserting, db.engine.dialect)
        db.limits()  # asked at open, so that no insert pays the round trip

    def insert_new(self, conversation_id: str, messages: Sequence[Message]) -> set[int]:
        """INSERTs that fit the server's limits (docs/sql.md); see RowRepository.insert_new.

        A tag-only row collides here too: ``fill`` stores its message.
        """
        check_keys(conversation_id)
        inserted: set[int] = set()
        for chunk in self._statements(conversation_id, messages):
            inserted |= self._insert_new(chunk)
        return {m.seq for m in messages} - inserted

    def fresh_insert(self, base: str) -> str:
        """PostgreSQL: the INSERT of a fresh send's rows, for a data-modifying CTE.

        base is an SQL expression giving the seq before the first: the i-th message bound by
        ``fresh_binds`` (from 1) goes to seq base + i. The rows are bound as one array per
        column (``unnest``), so the text is the same whatever the batch's size. A seq
        holding a row already is skipped, as by ``insert_new``; the INSERT returns the
        seqs it stored.
        """
        table = self._messages
        dialect = self.db.engine.dialect
        names = ", ".join(MESSAGE_COLUMNS)
        arrays = ", ".join(
            f"CAST(:row_{name} AS {table.c[name].type.compile(dialect)}[])"
            for name in MESSAGE_COLUMNS
        )
        return (
            f"INSERT INTO {table.name} (conversation_id, seq, {names})"
            f" SELECT :row_conversation_id, {base} + r.n, {names}"
            f" FROM unnest({arrays}) WITH ORDINALITY AS r({names}, n)"
            " ON CONFLICT DO NOTHING RETURNING seq"
        )

    def fresh_binds(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> dict[str, Any] | None:
        """The values of ``fresh_insert`` for messages, in the order given (seqs ignored).

        None when the rows are larger than ``FRESH_BYTES`` (then ``insert_new`` sends them as
        scalar rows, split to the server's limits, or refuses a value no statement holds,
        before anything is sent: docs/sql.md).
        """
        check_keys(conversation_id)
        rows = [_message_row(conversation_id, m) for m in messages]
        most = min(FRESH_BYTES, self.db.limits().max_bytes - STATEMENT_OVERHEAD)
        if sum(map(row_bytes_at_most, rows)) > most:
            return None
        binds: dict[str, Any] = {
            f"row_{name}": [row[name] for row in rows] for name in MESSAGE_COLUMNS
        }
        binds["row_conversation_id"] = conversation_id
        return binds

    def insert_new_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, set[int]]:
        """The rows of every conversation in as few INSERTs as the limits allow."""
        rows: list[dict[str, Any]] = []
        for conversation_id, messages in batches.items():
            check_keys(conversation_id)
            rows += [_message_row(conversation_id, m) for m in messages]
        sizes = [row_bytes(row) for row in rows]
        inserted: dict[str, set[int]] = {}
        for chunk in batches_of(rows, sizes, len(MESSAGE_COLUMNS) + 2, self.db.limits()):
            table = self._messages
            statement = self.db.insert_ignore(table).returning(table.c.conversation_id, table.c.seq)
            for conversation_id, seq in self.db.execute(statement, list(chunk)).rows:
                inserted.setdefault(conversation_id, set()).add(int(seq))
        missed: dict[str, set[int]] = {}
        for conversation_id, messages in batches.items():
            left = {m.seq for m in messages} - inserted.get(conversation_id, set())
            if left:
                missed[conversation_id] = left
        return missed

    def read(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Message, deleter and reader rows in one UNION; see RowRepository.read.

        For a viewer the deletions come back as one row per seq: the viewer's id when the
        viewer is among them, else OTHER_DELETERS (``''``, which sorts before every id).
        """
        check_keys(conversation_id)
        if not seqs:
            return {}
        scattered, params = bound_seqs(conversation_id, seqs)
        if viewer is None:
            rows = self.db.execute(self._reads.tagged[scattered], params).rows
        else:
            rows = self.db.execute(self._reads.viewed[scattered], {**params, "viewer": viewer}).rows
        return row_slots(conversation_id, rows)

    def view(
        self, conversation_id: str, viewer: str, pick: Pick
    ) -> tuple[Watermarks, dict[int, Slot]]:
        """The viewer's watermarks and the slots of ``pick.of(marks)`` in one statement.

        The watermark query is a one-row derived table joined to each part of the viewed
        read (``row_reads.Reads``): the seqs are clamped in the engine, and the message part's
        LEFT JOIN returns the watermarks even when no row is found. A latest or range pull
        is sent as prepared text (``Database.fetch``); an IN list goes through ``execute``.
        """
        check_keys(conversation_id, viewer)
        params: dict[str, Any] = {"conversation_id": conversation_id, "user_id": viewer}
        params["viewer"] = viewer
        reads = self._reads
        rows: Sequence[Sequence[Any]]
        if pick.latest:
            params["count"] = pick.latest
            rows = self.db.fetch(reads.prepared_latest, params)
        elif pick.seqs:
            scattered, bound = bound_seqs(conversation_id, pick.seqs)
            params.update(bound)
            if scattered:
                rows = self.db.execute(reads.pulled[True], params).rows
            else:
                rows = self.db.fetch(reads.prepared_range, params)
        else:  # nothing to read but the watermarks
            (row,) = self.db.execute(reads.marks, params).rows
            return Watermarks(*map(int, row)), {}
        marks = next(Watermarks(*map(int, row[:3])) for row in rows if row[0] is not None)
        return marks, row_slots(conversation_id, [row for row in rows if row[4] is not None], 3)

    def read_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Message, deleter and reader rows of every conversation in one UNION."""
        wanted = {conv: seqs for conv, seqs in wanted.items() if seqs}
        for conversation_id in wanted:
            check_keys(conversation_id)
        if not wanted:
            return {}
        schema = self.schema
        width = len(ROW_COLUMNS)

        def where(table: Table) -> ColumnElement[bool]:
            return or_(*(_at(table, conv, seqs) for conv, seqs in wanted.items()))

        tags = [
            select(
                literal_column(str(kind)).label("kind"),
                table.c.conversation_id,
                table.c.seq,
                table.c.user_id,
                *(null() for _ in range(width)),
            ).where(where(table))
            for kind, table in ((DELETION, schema.deletions), (READER, schema.readers))
        ]
        messages = select(
            literal_column(str(MESSAGE)).label("kind"),
            self._messages.c.conversation_id,
            self._messages.c.seq,
            cast(null(), String).label("user_id"),
            *(self._messages.c[name] for name in ROW_COLUMNS),
        ).where(where(self._messages))
        # Rows are (kind, conversation_id, seq, user_id, *ROW_COLUMNS); row_slots reads them
        # without the conversation_id.
        by_conversation: dict[str, list[Sequence[Any]]] = {}
        for row in self.db.execute(union_all(messages, *tags)).rows:
            by_conversation.setdefault(row[1], []).append((row[0], *row[2:]))
        return {conv: row_slots(conv, rows) for conv, rows in by_conversation.items()}

    def read_raising(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, seq: int
    ) -> tuple[dict[int, Slot], Raised]:
        """``read`` (no viewer) riding on the raise of user_id's read seq: one statement.

        See ``imbucket.adapters.sql.read_marks``.
        """
        check_keys(conversation_id)
        scattered, params = bound_seqs(conversation_id, seqs)
        rows = self._reads.tagged[scattered].subquery("tagged")
        statement = raising_read_seq(
            self.db, self.schema, conversation_id, user_id, seq, aggregated(self.db, rows)
        )
        max_seq, carried = self.db.execute(statement, params).rows[0]
        found = row_slots(conversation_id, carried_rows(carried))
        return found, Raised(int(max_seq), seq <= int(max_seq))

    def read_state(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """The message rows alone, without deleters and readers; see RowRepository."""
        check_keys(conversation_id)
        if not seqs:
            return {}
        scattered, params = bound_seqs(conversation_id, seqs)
        rows = self.db.execute(self._reads.state[scattered], params).rows
        return {row[0]: row_slot(conversation_id, row[0], row, 1) for row in rows}

    def fill(self, conversation_id: str, message: Message) -> bool:
        """One conditional UPDATE; see RowRepository.fill (it never creates the row)."""
        table = self._messages
        row = _message_row(conversation_id, message)
        fill = (
            update(table)
            .where(
                _at(table, conversation_id, [message.seq]),
                table.c.send_id.is_(None),
                table.c.purged.is_(False),
            )
            .values({name: row[name] for name in MESSAGE_COLUMNS})
        )
        return self.db.execute(fill).rowcount == 1

    def set_revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """A conditional UPDATE, then an INSERT of a revoke-only row if it missed."""
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
        return self.db.execute(new_row).rowcount > 0

    def patch(self, conversation_id: str, patches: Mapping[int, SlotPatch]) -> int:
        """One statement per kind of change: purge, deleters, early readers, is_read."""
        check_keys(conversation_id)
        for patch in patches.values():
            if patch.add_deleted_by is not None:
                check_keys(conversation_id, patch.add_deleted_by)
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

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """Rows in (conversation_id, seq) order, a page per statement; see RowRepository.scan.

        See ``imbucket.adapters.sql.row_scan``.
        """
        return self._scan.page(after, limit)

    def scan_rows(self, after: str | None, limit: int, align: int = 1) -> RowPage:
        """``scan``'s page with its plain slots left as message rows (``row_pages``)."""
        return self._pages.page(after, limit, align)

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

    def _purge(self, conversation_id: str, seqs: Sequence[int]) -> int:
        """Purge rows in one upsert: a purged row where none exists, the others wiped.

        Their deleter and reader rows go in the same statement: a data-modifying CTE on
        PostgreSQL, the schema's triggers on SQLite and MariaDB. MariaDB reports only how
        many rows the upsert touched, so it counts every seq (RowRepository.patch).
        """
        table = self._messages
        wiped: dict[str, Any] = {**dict.fromkeys(_WIPED), "is_read": False, "purged": True}
        rows = [{"conversation_id": conversation_id, "seq": s, **wiped} for s in seqs]
        if self.db.kind == "mariadb":
            upsert = mysql.insert(table).values(rows)
            self.db.execute(upsert.on_duplicate_key_update(list(wiped.items())))
            return len(seqs)
        dialect = postgresql if self.db.kind == "postgresql" else sqlite
        purge = (
            dialect.insert(table)
            .values(rows)
            .on_conflict_do_update(
                index_elements=[table.c.conversation_id, table.c.seq],
                set_=wiped,
                where=table.c.purged.is_(False),
            )
            .returning(table.c.seq)
        )
        if self.db.kind == "postgresql":
            marks = (self.schema.deletions, self.schema.readers)
            purge = purge.add_cte(
                *(
                    delete(m).where(_at(m, conversation_id, seqs)).cte(f"dropped_{n}")
                    for n, m in enumerate(marks)
                )
            )
        return len(self.db.execute(purge).rows)

    def _statements(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> Iterator[Sequence[dict[str, Any]]]:
        """The rows of messages in INSERTs that fit the server's limits (docs/sql.md)."""
        rows = [_message_row(conversation_id, m) for m in messages]
        limits = self.db.limits()
        params = len(MESSAGE_COLUMNS) + 2
        # A cheap bound of row_bytes settles nearly every batch without scanning values.
        fits = sum(map(row_bytes_at_most, rows)) + STATEMENT_OVERHEAD <= limits.max_bytes
        if fits and len(rows) * params <= limits.max_params:
            return iter((rows,))
        sizes = [row_bytes(row) for row in rows]
        return batches(rows, sizes, params, limits)

    def _insert_new(self, rows: Sequence[dict[str, Any]]) -> set[int]:
        """INSERT message rows for seqs that have none yet; returns the seqs inserted.

        A batch of up to ``prepared.MAX_ROWS`` rows runs prepared (compiled once per row
        count). A larger one goes as executemany parameters, not as ``values()``:
        SQLAlchemy then sends them as one multi-row INSERT (its "insertmanyvalues") from a
        statement compiled once, where a ``values()`` list is compiled again on every call,
        one bound parameter at a time (most of an ingest's time on SQLite).
        """
        statement = self._new_rows.get(len(rows))
        if statement is not None and all(row.keys() == _ROW_KEYS for row in rows):
            return {int(row[0]) for row in self.db.fetch(statement, row_binds(rows))}
        table = self._messages
        inserting = self.db.insert_ignore(table).returning(table.c.seq)
        return {row.seq for row in self.db.execute(inserting, list(rows)).rows}

    def _inserting(self, count: int) -> Insert:
        """The INSERT of count message rows (bound as ``{column}_{i}``) returning their seqs."""
        table = self._messages
        # The columns a message row leaves out, at their defaults, as an executemany sets them.
        defaults = {
            c.name: c.default.arg
            for c in table.c
            if c.name not in _ROW_KEYS and isinstance(c.default, ScalarElementColumnDefault)
        }
        binds = [
            {key: bindparam(f"{key}_{i}", type_=table.c[key].type) for key in _ROW_KEYS}
            for i in range(count)
        ]
        rows = [{**bound, **defaults} for bound in binds]
        return self.db.insert_ignore(table).values(rows).returning(table.c.seq)

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


class SqlRowStore(SqlStore[RowSchema, dict[int, Slot]], RowMessageStore):
    """The row state machine's MessageStore over a SqlRowRepository."""

    repository: SqlRowRepository

    def __init__(self, repository: SqlRowRepository) -> None:
        super().__init__(repository)
        self._bulk = RowBulkLoad(repository.db, repository.schema)

    def load_new(self, slots: Mapping[str, Mapping[int, Slot]]) -> dict[str, set[int]]:
        """The rows no table holds yet, by the engine's bulk path; see ports.bulk_load.BulkLoad."""
        return self._bulk.load_new(slots)

    row_form = ROW_FORM

    def scan_rows(self, after: str | None, limit: int, align: int = 1) -> RowPage:
        """``scan``'s page with its plain slots as message rows; see ports.bulk_load.RowExport."""
        return self.repository.scan_rows(after, limit, align)

    def slots_of(
        self, rows: Sequence[Sequence[Any]], skip: Mapping[str, set[int]] | None = None
    ) -> list[ScannedSlot]:
        """The slots of rows of this store's RowPage; see ports.bulk_load.RowExport."""
        return slots_of(rows, skip)

    def loads_rows(self, form: str) -> bool:
        """Whether rows of form load as they are (sql-row's own); see ports.bulk_load.RowLoad."""
        return form == ROW_FORM

    unit_seqs = 1  # a row holds one seq (ports.bulk_load.RowLoad)

    def load_new_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, set[int]]:
        """sql-row's rows no table holds yet, as they are; see ports.bulk_load.RowLoad."""
        return self._bulk.load_new_rows(rows)

    @property
    def db(self) -> Database:
        """The repository's database (for instrumentation and white-box tests)."""
        return self.repository.db

    def fresh_insert(self, base: str, single: bool = False) -> str:
        """See ``SqlRowRepository.fresh_insert`` (``adapters.sql.send`` composes it).

        single changes nothing: one text serves every batch size.
        """
        return self.repository.fresh_insert(base)

    def fresh_binds(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> dict[str, Any] | None:
        """See ``SqlRowRepository.fresh_binds``."""
        return self.repository.fresh_binds(conversation_id, messages)

    def fresh_rows(self, first: int, count: int) -> int:
        """One row per message (``adapters.sql.send.FreshRows``)."""
        return count

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """The pull's reads in one statement; see ViewReads.view."""
        return self.repository.view(conversation_id, viewer_id, pick)

    def _read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, seq: int
    ) -> tuple[dict[int, Slot], Raised]:
        """See ``SqlStore._read_raising``: the slots of seqs by seq."""
        return self.repository.read_raising(conversation_id, seqs, reader_id, seq)

    def _mark_found(
        self,
        found: dict[int, Slot],
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
    ) -> int:
        """See ``SqlStore._mark_found``: the rows' changes in one patch."""
        return self._apply_read(found, conversation_id, seqs, decide, guard)


# The most value bytes (``row_bytes_at_most``) of a fresh send's rows bound as arrays. An
# array travels as one text literal the server parses whole, which for tens of megabytes
# takes longer than the same values as scalar rows and can outlast the statement timeout.
FRESH_BYTES = 1 << 20
_WIPED = (*MESSAGE_COLUMNS, *REVOKE_COLUMNS)
# The keys of a message row (``_message_row``), in its order.
_ROW_KEYS = {"conversation_id": None, "seq": None, **dict.fromkeys(MESSAGE_COLUMNS)}.keys()


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
    doc["at_user_id_list"] = json.dumps(doc["at_user_id_list"])
    push = doc["offline_push"]
    doc["offline_push"] = None if push is None else json.dumps(push)
    doc[message_column("is_read")] = doc.pop("is_read")
    return {"conversation_id": conversation_id, **doc}
