"""sql-row: one row per seq (PRIMARY KEY conversation_id, seq) plus per-user tag rows.

A row exists once a seq holds anything: a message, a revoke, is_read or the purged mark; a
tag-only row has NULL message columns until its message lands. Who deleted a seq lives in
the deletions table and who read it before its message was stored in the readers table,
both keyed by (conversation_id, seq, user_id), so a repeated set-add hits the key and
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Select,
    String,
    Table,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    union,
    union_all,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.sql.selectable import CTE, Subquery

from imbucket.adapters.codec import message_to_doc, push_from_doc
from imbucket.adapters.row import RowMessageStore
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.read_marks import Raised, aggregated, carried_rows, raising_read_seq
from imbucket.adapters.sql.schema import RowSchema, check_keys, ensure_schema, message_column
from imbucket.adapters.sql.seq import watermarks_query
from imbucket.adapters.sql.sizing import batches, row_bytes
from imbucket.adapters.sql.sizing import batches as batches_of
from imbucket.adapters.sql.stats import footprint
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    MESSAGE_FIELDS,
    OTHER_DELETERS,
    PURGED_SLOT,
    Message,
    Pick,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
    Watermarks,
    stored_message,
    stored_slot,
)
from imbucket.domain.scan import ScannedSlot, SlotPage
from imbucket.domain.tags import Guard, marking_read
from imbucket.ports.view_reads import View

_MESSAGE = 0
_DELETION = 1
_READER = 2


class SqlRowRepository:
    """RowRepository with one row per seq on SQLite, PostgreSQL or MariaDB."""

    def __init__(self, db: Database, layout: BucketLayout, schema: RowSchema) -> None:
        ensure_schema(db, schema, layout)
        self.db = db
        self.layout = layout
        self.schema = schema
        self._messages = schema.messages
        self._reads = _Reads(schema, db)
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

    def insert_new_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, set[int]]:
        """The rows of every conversation in as few INSERTs as the limits allow."""
        rows: list[dict[str, Any]] = []
        for conversation_id, messages in batches.items():
            check_keys(conversation_id)
            rows += [_message_row(conversation_id, m) for m in messages]
        sizes = [row_bytes(row) for row in rows]
        inserted: dict[str, set[int]] = {}
        for chunk in batches_of(rows, sizes, len(_MESSAGE_COLUMNS) + 2, self.db.limits()):
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
        scattered, params = _bound(conversation_id, seqs)
        if viewer is None:
            rows = self.db.execute(self._reads.tagged[scattered], params).rows
        else:
            rows = self.db.execute(self._reads.viewed[scattered], {**params, "viewer": viewer}).rows
        return _slots(conversation_id, rows)

    def view(
        self, conversation_id: str, viewer: str, pick: Pick
    ) -> tuple[Watermarks, dict[int, Slot]]:
        """The viewer's watermarks and the slots of ``pick.of(marks)`` in one statement.

        The watermark query is a one-row derived table joined to each part of the viewed
        read (``_pull_read``): the seqs are clamped in the engine, and the message part's
        LEFT JOIN returns the watermarks even when no row is found.
        """
        check_keys(conversation_id, viewer)
        params: dict[str, Any] = {"conversation_id": conversation_id, "user_id": viewer}
        params["viewer"] = viewer
        if pick.latest:
            statement = self._reads.latest
            params["count"] = pick.latest
        elif pick.seqs:
            scattered, bound = _bound(conversation_id, pick.seqs)
            statement = self._reads.pulled[scattered]
            params.update(bound)
        else:  # nothing to read but the watermarks
            (row,) = self.db.execute(self._reads.marks, params).rows
            return Watermarks(*map(int, row)), {}
        rows = self.db.execute(statement, params).rows
        marks = next(Watermarks(*map(int, row[:3])) for row in rows if row[0] is not None)
        return marks, _slots(conversation_id, [row for row in rows if row[4] is not None], 3)

    def read_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Message, deleter and reader rows of every conversation in one UNION."""
        wanted = {conv: seqs for conv, seqs in wanted.items() if seqs}
        for conversation_id in wanted:
            check_keys(conversation_id)
        if not wanted:
            return {}
        schema = self.schema
        width = len(_ROW_COLUMNS)

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
            for kind, table in ((_DELETION, schema.deletions), (_READER, schema.readers))
        ]
        messages = select(
            literal_column(str(_MESSAGE)).label("kind"),
            self._messages.c.conversation_id,
            self._messages.c.seq,
            cast(null(), String).label("user_id"),
            *(self._messages.c[name] for name in _ROW_COLUMNS),
        ).where(where(self._messages))
        # Rows are (kind, conversation_id, seq, user_id, *_ROW_COLUMNS); _slots reads them
        # without the conversation_id.
        by_conversation: dict[str, list[Sequence[Any]]] = {}
        for row in self.db.execute(union_all(messages, *tags)).rows:
            by_conversation.setdefault(row[1], []).append((row[0], *row[2:]))
        return {conv: _slots(conv, rows) for conv, rows in by_conversation.items()}

    def read_raising(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, seq: int
    ) -> tuple[dict[int, Slot], Raised]:
        """``read`` (no viewer) riding on the raise of user_id's read seq: one statement.

        See ``imbucket.adapters.sql.read_marks``.
        """
        check_keys(conversation_id)
        scattered, params = _bound(conversation_id, seqs)
        rows = self._reads.tagged[scattered].subquery("tagged")
        statement = raising_read_seq(
            self.db, self.schema, conversation_id, user_id, seq, aggregated(self.db, rows)
        )
        max_seq, carried = self.db.execute(statement, params).rows[0]
        found = _slots(conversation_id, carried_rows(carried))
        return found, Raised(int(max_seq), seq <= int(max_seq))

    def read_state(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """The message rows alone, without deleters and readers; see RowRepository."""
        check_keys(conversation_id)
        if not seqs:
            return {}
        scattered, params = _bound(conversation_id, seqs)
        rows = self.db.execute(self._reads.state[scattered], params).rows
        return {row[0]: _slot(conversation_id, row[0], row, 1) for row in rows}

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
            .values({name: row[name] for name in _MESSAGE_COLUMNS})
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
        """Rows in (conversation_id, seq) order; see RowRepository.scan.

        One statement finds the page's keys in the three tables (a key range scan of each),
        then one ``read_many`` reads the slots of every conversation on the page.
        """
        start = None if after is None else tuple(json.loads(after))
        keys = [(row[0], int(row[1])) for row in self.db.execute(self._keys(start, limit)).rows]
        by_conversation: dict[str, list[int]] = {}
        for conversation_id, seq in keys:
            by_conversation.setdefault(conversation_id, []).append(seq)
        scanned: list[ScannedSlot] = []
        read = self.read_many(by_conversation)
        for conversation_id, seqs in by_conversation.items():
            found = read.get(conversation_id, {})
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
        sizes = [row_bytes(row) for row in rows]
        return batches(rows, sizes, len(_MESSAGE_COLUMNS) + 2, self.db.limits())

    def _insert_new(self, rows: Sequence[dict[str, Any]]) -> set[int]:
        """INSERT message rows for seqs that have none yet; returns the seqs inserted.

        The rows go as executemany parameters, not as ``values()``: SQLAlchemy then sends
        them as one multi-row INSERT (its "insertmanyvalues") from a statement compiled once,
        where a ``values()`` list is compiled again on every call, one bound parameter at a
        time (most of an ingest's time on SQLite).
        """
        table = self._messages
        statement = self.db.insert_ignore(table).returning(table.c.seq)
        return {row.seq for row in self.db.execute(statement, list(rows)).rows}

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


class SqlRowStore(RowMessageStore):
    """The row state machine's MessageStore over a SqlRowRepository."""

    repository: SqlRowRepository

    def __init__(self, repository: SqlRowRepository) -> None:
        super().__init__(repository)

    @property
    def db(self) -> Database:
        """The repository's database (for instrumentation and white-box tests)."""
        return self.repository.db

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """The pull's reads in one statement; see ViewReads.view."""
        return self.repository.view(conversation_id, viewer_id, pick)

    def batch(self) -> AbstractContextManager[None]:
        """One transaction for the block's writes; see MessageStore.batch."""
        return self.repository.db.batch()

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> tuple[int, bool]:
        """mark_read whose read also raises reader_id's read seq (``SqlReadMarks``)."""
        found, raised = self.repository.read_raising(conversation_id, seqs, reader_id, max(seqs))
        decide = marking_read(reader_id)
        changed = self._apply_read(found, conversation_id, seqs, decide, raised.guard(guard))
        return changed, raised.raised

    @property
    def schema(self) -> RowSchema:
        """The tables (for the benchmark's raw-driver arm and its maintenance step)."""
        return self.repository.schema

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for instrumentation such as round-trip counting)."""
        return self.repository.db.engine


_MESSAGE_COLUMNS = tuple(message_column(name) for name in MESSAGE_FIELDS if name != "seq")
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
    doc["at_user_id_list"] = json.dumps(doc["at_user_id_list"])
    push = doc["offline_push"]
    doc["offline_push"] = None if push is None else json.dumps(push)
    doc[message_column("is_read")] = doc.pop("is_read")
    return {"conversation_id": conversation_id, **doc}


class _Reads:
    """The read statements, built once per store and bound per call (see ``_bound``).

    Each comes in two shapes, indexed by "scattered": consecutive seqs read a key range
    (``seq BETWEEN :first AND :last``), other seqs an ``IN`` list (an expanding parameter).
    """

    def __init__(self, schema: RowSchema, db: Database) -> None:
        self.tagged = tuple(_tagged_read(schema, scattered) for scattered in (False, True))
        self.viewed = tuple(_tagged_read(schema, scattered, True) for scattered in (False, True))
        self.state = tuple(_state_read(schema, scattered) for scattered in (False, True))
        # The pulls, watermarks included (``SqlRowRepository.view``).
        self.marks = watermarks_query(schema)
        self.latest = _pull_read(schema, db, "latest")
        self.pulled = tuple(
            _pull_read(schema, db, "scattered" if scattered else "range")
            for scattered in (False, True)
        )


def _bound_at(table: Table, scattered: bool) -> ColumnElement[bool]:
    """The rows of the bound seqs in the bound conversation (the shapes of ``_at``)."""
    of = table.c.conversation_id == bindparam("conversation_id")
    if scattered:
        return and_(of, table.c.seq.in_(bindparam("seqs", expanding=True)))
    return and_(of, table.c.seq.between(bindparam("first"), bindparam("last")))


def _bound(conversation_id: str, seqs: Sequence[int]) -> tuple[bool, dict[str, Any]]:
    """Which shape of a ``_Reads`` statement reads seqs, and its parameters."""
    first, last = min(seqs), max(seqs)
    distinct = set(seqs)
    if last - first + 1 == len(distinct):
        return False, {"conversation_id": conversation_id, "first": first, "last": last}
    return True, {"conversation_id": conversation_id, "seqs": sorted(distinct)}


def _tagged_read(schema: RowSchema, scattered: bool, viewed: bool = False) -> CompoundSelect[Any]:
    """Message rows, then deleter and reader rows, of the bound seqs in one UNION ALL.

    Every row is (kind, seq, user_id, *_ROW_COLUMNS); tag rows carry NULL message columns.
    Viewed (bound ``viewer``): one deleter row per seq, the viewer's id when the viewer is
    among the deleters, else OTHER_DELETERS (``''``, which sorts before every id).
    """
    width = len(_ROW_COLUMNS)
    messages = schema.messages
    tags = [
        select(
            literal_column(str(kind)).label("kind"),
            table.c.seq,
            table.c.user_id,
            *(null() for _ in range(width)),
        ).where(_bound_at(table, scattered))
        for kind, table in ((_DELETION, schema.deletions), (_READER, schema.readers))
    ]
    if viewed:
        deletions = schema.deletions.c
        mine = case(
            (deletions.user_id == bindparam("viewer"), deletions.user_id), else_=OTHER_DELETERS
        )
        tags[0] = (
            select(
                literal_column(str(_DELETION)).label("kind"),
                deletions.seq,
                func.max(mine).label("user_id"),
                *(null() for _ in range(width)),
            )
            .where(_bound_at(schema.deletions, scattered))
            .group_by(deletions.seq)
        )
    rows = select(
        literal_column(str(_MESSAGE)).label("kind"),
        messages.c.seq,
        cast(null(), String).label("user_id"),
        *(messages.c[name] for name in _ROW_COLUMNS),
    ).where(_bound_at(messages, scattered))
    return union_all(rows, *tags)


def _pull_read(schema: RowSchema, db: Database, shape: str) -> CompoundSelect[Any]:
    """A pull's viewed read with the watermarks: one statement, built once per store.

    Rows are (max_seq, min_seq, user_min_seq, kind, seq, user_id, *_ROW_COLUMNS). The
    watermarks (``w``) come with the message part, whose LEFT JOIN yields one row even when
    no message is found; the tag parts carry NULL there. Every part reads the seqs of
    ``_pulled`` (by shape), clamped to the viewer's visible range.
    """
    w: Subquery | CTE
    if shape != "scattered" and db.kind in _BOUNDS_ONCE:
        w = _bounds(schema, db, shape)
        at = _within(w)

        def tagged(table: Table) -> Any:
            return table  # the CTE's scalar subqueries in ``at`` bound it alone

    else:
        # Not ``derived``: PostgreSQL then computes each bound once per part (an InitPlan)
        # and uses it in the index condition; a derived table it cannot flatten would turn
        # the bounds into a join filter over the whole conversation.
        w = watermarks_query(schema).subquery("w")
        at = _pulled(w, db, shape)

        def tagged(table: Table) -> Any:
            return w.join(table, true())  # the part's WHERE holds the condition

    width = len(_ROW_COLUMNS)
    no_marks = [null() for _ in range(3)]
    messages, deletions, readers = schema.messages, schema.deletions, schema.readers
    mine = case(
        (deletions.c.user_id == bindparam("viewer"), deletions.c.user_id), else_=OTHER_DELETERS
    )
    rows = select(
        w.c.max_seq,
        w.c.min_seq,
        w.c.user_min_seq,
        literal_column(str(_MESSAGE)).label("kind"),
        messages.c.seq,
        cast(null(), String).label("user_id"),
        *(messages.c[name] for name in _ROW_COLUMNS),
    ).select_from(w.outerjoin(messages, at(messages)))
    deleted = (
        select(
            *no_marks,
            literal_column(str(_DELETION)),
            deletions.c.seq,
            func.max(mine),
            *(null() for _ in range(width)),
        )
        .select_from(tagged(deletions))
        .where(at(deletions))
        .group_by(deletions.c.seq)
    )
    read = (
        select(
            *no_marks,
            literal_column(str(_READER)),
            readers.c.seq,
            readers.c.user_id,
            *(null() for _ in range(width)),
        )
        .select_from(tagged(readers))
        .where(at(readers))
    )
    return union_all(rows, deleted, read)


# Engines whose bounded pulls read the watermarks once, from a CTE (``_bounds``).
_BOUNDS_ONCE = frozenset({"postgresql", "sqlite"})


def _bounds(schema: RowSchema, db: Database, shape: str) -> CTE:
    """The watermarks and the clamped seq range of a latest or range pull, as one CTE.

    Each part of the pull reads ``low`` and ``high`` through a scalar subquery of the CTE:
    the engine evaluates the counters once per statement, not once per reference (as the
    flattened derived table does), and still sees the bounds as constants of the index
    condition, where a join to the CTE would filter the whole conversation instead.
    """
    marks = watermarks_query(schema, derived=True).subquery("marks")
    low, high = _range(marks, db, shape)
    query = select(marks.c.max_seq, marks.c.min_seq, marks.c.user_min_seq)
    w = query.add_columns(low.label("low"), high.label("high")).cte("w")
    return w.prefix_with("MATERIALIZED", dialect="postgresql")


def _within(w: CTE) -> Callable[[Table], ColumnElement[bool]]:
    """The condition on a table's rows of the range the CTE w bounds."""
    low, high = select(w.c.low).scalar_subquery(), select(w.c.high).scalar_subquery()

    def at(table: Table) -> ColumnElement[bool]:
        of = table.c.conversation_id == bindparam("conversation_id")
        return and_(of, table.c.seq.between(low, high))

    return at


def _pulled(w: Subquery, db: Database, shape: str) -> Callable[[Table], ColumnElement[bool]]:
    """The condition on a table's rows that a pull of shape reads, clamped by ``w``.

    - ``latest``: the newest ``:count`` seqs, ``greatest(max_seq - count + 1, floor, 1)``
      to ``max_seq`` (the range depends on max_seq, so it is computed in the engine);
    - ``range``: ``:first`` to ``:last``; ``scattered``: the ``:seqs`` (an IN list).
    """
    low, high = _range(w, db, shape)

    def at(table: Table) -> ColumnElement[bool]:
        of = table.c.conversation_id == bindparam("conversation_id")
        if shape != "scattered":
            return and_(of, table.c.seq.between(low, high))
        # The IN list finds the rows; the clamp, hidden in a CASE, only filters them (as a
        # plain range, SQLite would scan from the floor to max_seq instead).
        visible = case((table.c.seq.between(low, high), 1), else_=0) == 1
        return and_(of, table.c.seq.in_(bindparam("seqs", expanding=True)), visible)

    return at


def _range(w: Subquery, db: Database, shape: str) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """The first and last seq a pull of shape may read, clamped by the watermarks of w."""
    floor = db.greatest(w.c.min_seq, w.c.user_min_seq)
    low: ColumnElement[Any] = floor
    high: ColumnElement[Any] = w.c.max_seq
    if shape == "latest":
        newest = w.c.max_seq - bindparam("count", type_=BigInteger) + 1
        low = db.greatest(db.greatest(newest, floor), literal(1, BigInteger))
    elif shape == "range":
        low = db.greatest(floor, bindparam("first", type_=BigInteger))
        high = db.least(w.c.max_seq, bindparam("last", type_=BigInteger))
    return low, high


def _state_read(schema: RowSchema, scattered: bool) -> Select[Any]:
    """The message rows alone of the bound seqs: (seq, *_ROW_COLUMNS)."""
    table = schema.messages
    columns = (table.c.seq, *(table.c[name] for name in _ROW_COLUMNS))
    return select(*columns).where(_bound_at(table, scattered))


# Positions of the _ROW_COLUMNS in a row of the read statements, from the first (at start).
_SEND_ID = _MESSAGE_COLUMNS.index("send_id")
_OPTIONS = _MESSAGE_COLUMNS.index("options")
_PUSH = _MESSAGE_COLUMNS.index("offline_push")
_AT_USERS = _MESSAGE_COLUMNS.index("at_user_id_list")
_MSG_IS_READ = _MESSAGE_COLUMNS.index(message_column("is_read"))
_REVOKED_BY = len(_MESSAGE_COLUMNS)
_IS_READ = _REVOKED_BY + len(_REVOKE_COLUMNS)
_PURGED = _IS_READ + 1


def _slot(
    conversation_id: str,
    seq: int,
    row: Sequence[Any],
    start: int,
    deleted_by: frozenset[str] = frozenset(),
    read_by: frozenset[str] = frozenset(),
) -> Slot:
    """The slot of seq's message row (its _ROW_COLUMNS from start), with the tags' users.

    The row is one this store wrote (its values were checked on the way in): its message is
    built positionally, without checking the values again; a tag-only row has none.
    """
    if row[start + _PURGED]:
        return PURGED_SLOT
    revoke = None
    if row[start + _REVOKED_BY] is not None:
        user, role, nickname, time = row[start + _REVOKED_BY : start + _IS_READ]
        revoke = Revoke(user, role, nickname, time)
    message = None
    if row[start + _SEND_ID] is not None:
        values = list(row[start : start + _REVOKED_BY])
        options = values[_OPTIONS]
        values[_OPTIONS] = orjson.loads(options) if options and options != "{}" else {}
        push, users = values[_PUSH], values[_AT_USERS]
        values[_PUSH] = None if push is None else push_from_doc(orjson.loads(push))
        values[_AT_USERS] = tuple(orjson.loads(users)) if users and users != "[]" else ()
        values[_MSG_IS_READ] = bool(values[_MSG_IS_READ])
        message = stored_message(conversation_id, seq, values)
    return stored_slot(message, revoke, deleted_by, bool(row[start + _IS_READ]), False, read_by)


def _slots(conversation_id: str, rows: Sequence[Sequence[Any]], offset: int = 0) -> dict[int, Slot]:
    """Assemble slots from the UNION of message rows, deleter rows and reader rows.

    Each row's (kind, seq, user_id, *_ROW_COLUMNS) start at offset.
    """
    found: dict[int, Sequence[Any]] = {}
    users: dict[tuple[int, int], set[str]] = {}
    kind, at, user, start = offset, offset + 1, offset + 2, offset + 3
    for row in rows:
        if row[kind] == _MESSAGE:
            found[row[at]] = row
        else:
            users.setdefault((row[kind], row[at]), set()).add(row[user])
    slots: dict[int, Slot] = {}
    if not users:  # the usual pull: message rows only, no set of users to build per seq
        for seq, row in found.items():
            slot = _slot(conversation_id, seq, row, start)
            if not slot.is_empty:
                slots[seq] = slot
        return slots
    for seq in {*found, *(seq for _, seq in users)}:
        deleted_by = frozenset(users.get((_DELETION, seq), ()))
        read_by = frozenset(users.get((_READER, seq), ()))
        stored = found.get(seq)
        if stored is None:
            slot = Slot(deleted_by=deleted_by, read_by=read_by)
        else:  # a deleter racing the purge may be left over: _slot ignores it
            slot = _slot(conversation_id, seq, stored, start, deleted_by, read_by)
        if not slot.is_empty:
            slots[seq] = slot
    return slots
