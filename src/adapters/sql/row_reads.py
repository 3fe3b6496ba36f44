"""sql-row's reads: the statements that read a conversation's rows, and the slots built from them.

A read is one UNION ALL of message rows, deleter rows and reader rows (each row says its kind:
``MESSAGE``, ``DELETION`` or ``READER``); ``row_slots`` assembles the slots of such rows. The
statements are built once per store (``Reads``) and bound per call (``bound_seqs``); a pull's come
with the conversation's watermarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    func,
    literal,
    literal_column,
    null,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.selectable import CTE, FromClause, LateralFromClause, Subquery

from imbucket.adapters.codec import push_from_doc
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.prepared import Prepared
from imbucket.adapters.sql.schema import RowSchema, message_column
from imbucket.adapters.sql.seq import watermarks_query
from imbucket.domain.model import (
    MESSAGE_FIELDS,
    OTHER_DELETERS,
    PURGED_SLOT,
    Revoke,
    Slot,
    stored_message,
    stored_slot,
)

# The kind of a row of a read.
MESSAGE = 0
DELETION = 1
READER = 2
MESSAGE_COLUMNS = tuple(message_column(name) for name in MESSAGE_FIELDS if name != "seq")
REVOKE_COLUMNS = ("revoked_by", "revoke_role", "revoke_nickname", "revoke_time")
ROW_COLUMNS = (*MESSAGE_COLUMNS, *REVOKE_COLUMNS, "is_read", "purged")


class Reads:
    """The read statements, built once per store and bound per call (see ``bound_seqs``).

    Each comes in two shapes, indexed by "scattered": consecutive seqs read a key range
    (``seq BETWEEN :first AND :last``), other seqs a list (``bound_lookup``).
    """

    def __init__(self, schema: RowSchema, db: Database) -> None:
        lookups = tuple(bound_lookup(db, scattered) for scattered in (False, True))
        self.tagged = tuple(_tagged_read(schema, lookup) for lookup in lookups)
        self.viewed = tuple(_tagged_read(schema, lookup, True) for lookup in lookups)
        self.state = tuple(_state_read(schema, lookup) for lookup in lookups)
        # The pulls, watermarks included (``SqlRowRepository.view``).
        self.marks = watermarks_query(schema)
        self.latest = _pull_read(schema, db, "latest")
        self.pulled = tuple(
            _pull_read(schema, db, "scattered" if scattered else "range")
            for scattered in (False, True)
        )
        # The pulls without an IN list, sent as prepared text (``Database.fetch``).
        dialect = db.engine.dialect
        self.prepared_latest = Prepared(self.latest, dialect)
        self.prepared_range = Prepared(self.pulled[False], dialect)


# What a read selects a table's rows from, whose columns (``.c``) it reads, and its WHERE.
Lookup = Callable[[Table], tuple[FromClause, Any, ColumnElement[bool]]]


def bound_lookup(db: Database, scattered: bool) -> Lookup:
    """A table's rows of the bound seqs in the bound conversation.

    A key range, or an IN list (an expanding parameter); on PostgreSQL a scattered list is
    one array parameter looked up seq by seq (``seq_lookup``).
    """

    def lookup(table: Table) -> tuple[FromClause, Any, ColumnElement[bool]]:
        of = table.c.conversation_id == bindparam("conversation_id")
        if not scattered:
            key_range = table.c.seq.between(bindparam("first"), bindparam("last"))
            return table, table, and_(of, key_range)
        if db.kind == "postgresql":
            rows, found = seq_lookup(table)
            return rows, found, true()
        return table, table, and_(of, table.c.seq.in_(bindparam("seqs", expanding=True)))

    return lookup


def seq_lookup(table: Table) -> tuple[FromClause, LateralFromClause]:
    """PostgreSQL: table's rows at the bound ``seqs`` of the bound conversation, per seq.

    ``unnest(:seqs) AS wanted(seq) JOIN LATERAL (SELECT … WHERE conversation_id =
    :conversation_id AND seq = wanted.seq OFFSET 0)``: each seq is a primary-key lookup.
    The seqs must stay in the index condition under every plan. A generic plan (psycopg
    prepares a statement it runs often) sizes a conversation at the table's average, and
    then reading the whole conversation by its id and filtering the seqs, or joining the
    seqs to it, can look cheaper than a descent per seq: for a large conversation it reads
    every page of it. The OFFSET keeps the subquery from being flattened into such a join;
    planned alone, a lookup by the whole key is always the cheapest. Returns the FROM item
    and the subquery, whose columns are the table's.
    """
    seqs = cast(bindparam("seqs"), ARRAY(BigInteger))
    wanted = func.unnest(seqs).table_valued("seq").render_derived(name="wanted")
    found = (
        select(table)
        .where(table.c.conversation_id == bindparam("conversation_id"))
        .where(table.c.seq == wanted.c.seq)
        .offset(literal_column("0"))
        .lateral(f"{table.name}_at")
    )
    return wanted.join(found, true()), found


def bound_seqs(conversation_id: str, seqs: Sequence[int]) -> tuple[bool, dict[str, Any]]:
    """Which shape of a ``Reads`` statement reads seqs, and its parameters."""
    first, last = min(seqs), max(seqs)
    distinct = set(seqs)
    if last - first + 1 == len(distinct):
        return False, {"conversation_id": conversation_id, "first": first, "last": last}
    return True, {"conversation_id": conversation_id, "seqs": sorted(distinct)}


def _tagged_read(schema: RowSchema, lookup: Lookup, viewed: bool = False) -> CompoundSelect[Any]:
    """Message rows, then deleter and reader rows, of the bound seqs in one UNION ALL.

    Every row is (kind, seq, user_id, *ROW_COLUMNS); tag rows carry NULL message columns.
    Viewed (bound ``viewer``): one deleter row per seq, the viewer's id when the viewer is
    among the deleters, else OTHER_DELETERS (``''``, which sorts before every id).
    """
    width = len(ROW_COLUMNS)
    tags = []
    for kind, table in ((DELETION, schema.deletions), (READER, schema.readers)):
        found, t, where = lookup(table)
        tag = select(literal_column(str(kind)).label("kind"), t.c.seq, t.c.user_id)
        tag = tag.add_columns(*(null() for _ in range(width))).select_from(found)
        tags.append(tag.where(where))
    if viewed:
        found, t, where = lookup(schema.deletions)
        mine = case((t.c.user_id == bindparam("viewer"), t.c.user_id), else_=OTHER_DELETERS)
        tags[0] = (
            select(
                literal_column(str(DELETION)).label("kind"),
                t.c.seq,
                func.max(mine).label("user_id"),
                *(null() for _ in range(width)),
            )
            .select_from(found)
            .where(where)
            .group_by(t.c.seq)
        )
    found, messages, where = lookup(schema.messages)
    rows = select(
        literal_column(str(MESSAGE)).label("kind"),
        messages.c.seq,
        cast(null(), String).label("user_id"),
        *(messages.c[name] for name in ROW_COLUMNS),
    ).select_from(found)
    return union_all(rows.where(where), *tags)


def _pull_read(schema: RowSchema, db: Database, shape: str) -> CompoundSelect[Any]:
    """A pull's viewed read with the watermarks: one statement, built once per store.

    Rows are (max_seq, min_seq, user_min_seq, kind, seq, user_id, *ROW_COLUMNS). The
    watermarks (``w``) come with the message part, whose LEFT JOIN yields one row even when
    no message is found; the tag parts carry NULL there. Every part reads the seqs of
    ``pulled_at`` (by shape), clamped to the viewer's visible range.
    """
    w: Subquery | CTE
    source = pulled_rows(db, shape)
    if shape != "scattered" and db.kind in _BOUNDS_ONCE:
        w = _bounds(schema, db, shape)
        at = _within(w)

        def tagged(table: Table) -> tuple[FromClause, Any]:
            return table, table  # the CTE's scalar subqueries in ``at`` bound it alone

    else:
        # Not ``derived``: PostgreSQL then computes each bound once per part (an InitPlan)
        # and uses it in the index condition; a derived table it cannot flatten would turn
        # the bounds into a join filter over the whole conversation.
        w = watermarks_query(schema).subquery("w")
        at = pulled_at(w, db, shape)

        def tagged(table: Table) -> tuple[FromClause, Any]:
            found, rows = source(table)
            return w.join(found, true()), rows  # the part's WHERE holds the condition

    width = len(ROW_COLUMNS)
    no_marks = [null() for _ in range(3)]
    found, deletions = tagged(schema.deletions)
    mine = case(
        (deletions.c.user_id == bindparam("viewer"), deletions.c.user_id), else_=OTHER_DELETERS
    )
    rows = message_part(w, source(schema.messages), at)
    deleted = (
        select(
            *no_marks,
            literal_column(str(DELETION)),
            deletions.c.seq,
            func.max(mine),
            *(null() for _ in range(width)),
        )
        .select_from(found)
        .where(at(deletions))
        .group_by(deletions.c.seq)
    )
    found, readers = tagged(schema.readers)
    read = (
        select(
            *no_marks,
            literal_column(str(READER)),
            readers.c.seq,
            readers.c.user_id,
            *(null() for _ in range(width)),
        )
        .select_from(found)
        .where(at(readers))
    )
    return union_all(rows, deleted, read)


def message_part(
    w: Subquery | CTE, source: tuple[FromClause, Any], at: Callable[[Any], ColumnElement[bool]]
) -> Select[Any]:
    """The message part of a pull: the messages at selects, with the watermarks of w.

    source is the FROM item of the messages and whose columns are theirs (``pulled_rows``).
    Rows are (max_seq, min_seq, user_min_seq, kind, seq, user_id, *ROW_COLUMNS). A LEFT JOIN
    from w: one row, with NULL message columns, even when no message is found.
    """
    found, messages = source
    return select(
        w.c.max_seq,
        w.c.min_seq,
        w.c.user_min_seq,
        literal_column(str(MESSAGE)).label("kind"),
        messages.c.seq,
        cast(null(), String).label("user_id"),
        *(messages.c[name] for name in ROW_COLUMNS),
    ).select_from(w.outerjoin(found, at(messages)))


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


def pulled_rows(db: Database, shape: str) -> Callable[[Table], tuple[FromClause, Any]]:
    """What a pull of shape selects a table's rows from, and whose columns are theirs.

    The table itself, but for a scattered pull on PostgreSQL: the seq-by-seq lookup of the
    bound seqs (``seq_lookup``), which ``pulled_at`` then only clamps.
    """
    if shape == "scattered" and db.kind == "postgresql":
        return seq_lookup
    return lambda table: (table, table)


def pulled_at(w: Subquery, db: Database, shape: str) -> Callable[[Any], ColumnElement[bool]]:
    """The condition on a table's rows that a pull of shape reads, clamped by ``w``.

    - ``latest``: the newest ``:count`` seqs, ``greatest(max_seq - count + 1, floor, 1)``
      to ``max_seq`` (the range depends on max_seq, so it is computed in the engine);
    - ``range``: ``:first`` to ``:last``; ``scattered``: the ``:seqs`` (an IN list, or on
      PostgreSQL the clamp alone of the rows ``pulled_rows`` looked up).
    """
    low, high = _range(w, db, shape)
    looked_up = shape == "scattered" and db.kind == "postgresql"

    def at(table: Any) -> ColumnElement[bool]:
        of = table.c.conversation_id == bindparam("conversation_id")
        if shape != "scattered":
            return and_(of, table.c.seq.between(low, high))
        # The seqs find the rows; the clamp, hidden in a CASE, only filters them (as a
        # plain range, SQLite would scan from the floor to max_seq instead).
        visible = case((table.c.seq.between(low, high), 1), else_=0) == 1
        if looked_up:
            return visible
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


def _state_read(schema: RowSchema, lookup: Lookup) -> Select[Any]:
    """The message rows alone of the bound seqs: (seq, *ROW_COLUMNS)."""
    found, table, where = lookup(schema.messages)
    columns = (table.c.seq, *(table.c[name] for name in ROW_COLUMNS))
    return select(*columns).select_from(found).where(where)


# Positions of the ROW_COLUMNS in a row of the read statements, from the first (at start).
_SEND_ID = MESSAGE_COLUMNS.index("send_id")
_OPTIONS = MESSAGE_COLUMNS.index("options")
_PUSH = MESSAGE_COLUMNS.index("offline_push")
_AT_USERS = MESSAGE_COLUMNS.index("at_user_id_list")
_MSG_IS_READ = MESSAGE_COLUMNS.index(message_column("is_read"))
_REVOKED_BY = len(MESSAGE_COLUMNS)
_IS_READ = _REVOKED_BY + len(REVOKE_COLUMNS)
_PURGED = _IS_READ + 1


# The stored columns of a message's extras (options onwards) when all are their defaults.
_USUAL_EXTRAS = ("{}", "", "", 0, False, None, "[]", "")


def row_slot(
    conversation_id: str,
    seq: int,
    row: Sequence[Any],
    start: int,
    deleted_by: frozenset[str] = frozenset(),
    read_by: frozenset[str] = frozenset(),
) -> Slot:
    """The slot of seq's message row (its ROW_COLUMNS from start), with the tags' users.

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
        message = stored_message(conversation_id, seq, row_message_values(row, start))
    return stored_slot(message, revoke, deleted_by, bool(row[start + _IS_READ]), False, read_by)


def row_message_values(row: Sequence[Any], start: int) -> list[Any]:
    """The stored message's fields after seq as a Message holds them, from its ROW_COLUMNS.

    The row holds a message (its send_id is set); its JSON columns are decoded.
    """
    values = list(row[start : start + _REVOKED_BY])
    options = values[_OPTIONS]
    values[_OPTIONS] = orjson.loads(options) if options and options != "{}" else {}
    push, users = values[_PUSH], values[_AT_USERS]
    values[_PUSH] = None if push is None else push_from_doc(orjson.loads(push))
    values[_AT_USERS] = tuple(orjson.loads(users)) if users and users != "[]" else ()
    values[_MSG_IS_READ] = bool(values[_MSG_IS_READ])
    return values


def row_message_count(rows: Sequence[Sequence[Any]], start: int) -> int:
    """How many of the message rows (ROW_COLUMNS from start) hold a message (not purged)."""
    send_id, purged = start + _SEND_ID, start + _PURGED
    return sum(1 for row in rows if row[send_id] is not None and not row[purged])


def row_holds_something(row: Sequence[Any], start: int) -> bool:
    """Whether a message row's slot is not empty: a message, a revoke, is_read or purged."""
    return (
        row[start + _SEND_ID] is not None
        or row[start + _REVOKED_BY] is not None
        or bool(row[start + _IS_READ])
        or bool(row[start + _PURGED])
    )


def usual_message_fields(row: Sequence[Any], start: int) -> list[Any] | None:
    """The fields before options of a row holding a plain message whose extras are defaults.

    A plain message: no revoke, not read, not purged; its extras (options onwards) as a
    message without any stores them. None for every other row (``row_slot_parts`` reads it).
    """
    if (
        row[start + _SEND_ID] is None
        or row[start + _REVOKED_BY] is not None
        or row[start + _IS_READ]
        or row[start + _PURGED]
        or row[start + _OPTIONS : start + _REVOKED_BY] != _USUAL_EXTRAS
    ):
        return None
    return list(row[start : start + _OPTIONS])


def row_slot_parts(
    row: Sequence[Any], start: int
) -> tuple[list[Any] | None, Sequence[Any] | None, bool, bool]:
    """A message row's slot as (message values, revoke values, is_read, purged).

    What ``row_slot`` builds a Slot of, for a copy that needs no Slot: the message's fields
    after seq (``row_message_values``; None without a message) and the revoke's columns
    (None without one); a purged row's other parts are None and False.
    """
    if row[start + _PURGED]:
        return None, None, False, True
    values = row_message_values(row, start) if row[start + _SEND_ID] is not None else None
    revoke = None
    if row[start + _REVOKED_BY] is not None:
        revoke = row[start + _REVOKED_BY : start + _IS_READ]
    return values, revoke, bool(row[start + _IS_READ]), False


def row_slots(
    conversation_id: str, rows: Sequence[Sequence[Any]], offset: int = 0
) -> dict[int, Slot]:
    """Assemble slots from the UNION of message rows, deleter rows and reader rows.

    Each row's (kind, seq, user_id, *ROW_COLUMNS) start at offset.
    """
    found: dict[int, Sequence[Any]] = {}
    users: dict[tuple[int, int], set[str]] = {}
    kind, at, user, start = offset, offset + 1, offset + 2, offset + 3
    for row in rows:
        if row[kind] == MESSAGE:
            found[row[at]] = row
        else:
            users.setdefault((row[kind], row[at]), set()).add(row[user])
    slots: dict[int, Slot] = {}
    if not users:  # the usual pull: message rows only, no set of users to build per seq
        for seq, row in found.items():
            slot = row_slot(conversation_id, seq, row, start)
            if slot.message is not None or not slot.is_empty:  # a message answers at once
                slots[seq] = slot
        return slots
    for seq in {*found, *(seq for _, seq in users)}:
        deleted_by = frozenset(users.get((DELETION, seq), ()))
        read_by = frozenset(users.get((READER, seq), ()))
        stored = found.get(seq)
        if stored is None:
            slot = Slot(deleted_by=deleted_by, read_by=read_by)
        else:  # a deleter racing the purge may be left over: row_slot ignores it
            slot = row_slot(conversation_id, seq, stored, start, deleted_by, read_by)
        if not slot.is_empty:
            slots[seq] = slot
    return slots
