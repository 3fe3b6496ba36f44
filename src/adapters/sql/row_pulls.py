"""sql-row: a herd of pulls of one conversation answered by one statement.

The statement reads the conversation's counters, every joined viewer's clear floor, the
message and reader rows of the seqs any of them may see (clamped by the conversation's
floor), and of the deleter rows only the joined viewers' own plus one marker per deleted
seq. Each slot is built once; a viewer's answer keeps its visible seqs, and a deleted seq
is rebuilt for it with its own deletion (the deleter list never leaves the engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    CompoundSelect,
    String,
    bindparam,
    cast,
    column,
    literal,
    literal_column,
    null,
    select,
    text,
    union_all,
)
from sqlalchemy.sql.selectable import Subquery

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row import SqlRowStore
from imbucket.adapters.sql.row_reads import (
    DELETION,
    READER,
    ROW_COLUMNS,
    bound_seqs,
    message_part,
    pulled_at,
    pulled_rows,
    row_slots,
)
from imbucket.adapters.sql.schema import RowSchema, check_keys
from imbucket.domain.model import OTHER_DELETERS, Pick, Slot, Watermarks
from imbucket.ports.view_reads import View

_FLOOR = 3  # a row carrying one joined viewer's clear floor
# Rows are (max_seq, min_seq, user_min_seq, kind, seq, user_id, *ROW_COLUMNS), as the
# one-viewer pull's; kind and seq are at these positions, the row columns from _START.
_KIND, _SEQ, _USER, _START = 3, 4, 5, 3
Rows = Sequence[Sequence[Any]]


class SqlRowPulls:
    """``SharedViewReads`` of a ``SqlRowStore``: one statement for many viewers."""

    def __init__(self, store: SqlRowStore) -> None:
        self.store = store
        self.db = store.repository.db
        schema = store.repository.schema
        self._reads = {
            shape: _herd_read(schema, self.db, shape) for shape in ("latest", "range", "scattered")
        }

    def view_many(
        self, conversation_id: str, viewer_ids: Sequence[str], pick: Pick
    ) -> dict[str, View]:
        """Each viewer's ``view``, all from one statement; see SharedViewReads.view_many."""
        viewers = list(dict.fromkeys(viewer_ids))
        check_keys(conversation_id)
        for viewer in viewers:
            check_keys(conversation_id, viewer)
        if not pick.latest and not pick.seqs:  # nothing to share but the watermarks
            return {v: self.store.view(conversation_id, v, pick) for v in viewers}
        params: dict[str, Any] = {"conversation_id": conversation_id}
        params.update(viewers=viewers, floor_viewers=viewers)
        if pick.latest:
            shape = "latest"
            params["count"] = pick.latest
        else:
            scattered, bound = bound_seqs(conversation_id, pick.seqs)
            shape = "scattered" if scattered else "range"
            params.update(bound)
        rows = self.db.execute(self._reads[shape], params).rows
        return _answers(conversation_id, viewers, pick, rows)


def _answers(conversation_id: str, viewers: list[str], pick: Pick, rows: Rows) -> dict[str, View]:
    """Every viewer's view from the herd statement's rows."""
    max_seq = min_seq = 0
    floors: dict[str, int] = {}
    shared: list[Sequence[Any]] = []
    by_seq: dict[int, list[Sequence[Any]]] = {}
    deleters: dict[int, set[str]] = {}
    for row in rows:
        kind = row[_KIND]
        if row[0] is not None:
            max_seq, min_seq = int(row[0]), int(row[1])
        if kind == _FLOOR:
            floors[row[_USER]] = int(row[2])
        elif kind == DELETION:
            deleters.setdefault(int(row[_SEQ]), set()).add(row[_USER])
        elif row[_SEQ] is not None:
            shared.append(row)
            by_seq.setdefault(int(row[_SEQ]), []).append(row)
    slots = row_slots(conversation_id, shared, _START)
    answers: dict[str, View] = {}
    for viewer in viewers:
        marks = Watermarks(max_seq, min_seq, floors.get(viewer, 0))
        seqs = pick.of(marks)
        found = {seq: slot for seq in seqs if (slot := slots.get(seq)) is not None}
        for seq in deleters.keys() & set(seqs):
            found.pop(seq, None)
            found.update(_deleted(conversation_id, viewer, seq, by_seq.get(seq, []), deleters))
        answers[viewer] = marks, found
    return answers


def _deleted(
    conversation_id: str, viewer: str, seq: int, rows: Rows, deleters: dict[int, set[str]]
) -> dict[int, Slot]:
    """A deleted seq's slot as the viewer's own read builds it.

    That read has one deleter row per seq: the viewer's id when it deleted the seq, else
    OTHER_DELETERS.
    """
    mine = viewer if viewer in deleters[seq] else OTHER_DELETERS
    width = len(rows[0]) if rows else _START + 3 + len(ROW_COLUMNS)
    marker: list[Any] = [None] * width
    marker[_KIND], marker[_SEQ], marker[_USER] = DELETION, seq, mine
    return row_slots(conversation_id, [*rows, marker], _START)


def _herd_read(schema: RowSchema, db: Database, shape: str) -> CompoundSelect[Any]:
    """The herd statement of shape (``pulled_at``'s shapes), built once per store.

    Its rows are those of the one-viewer pull (``row_reads.Reads``) read under the conversation's
    floor alone, with the deleter rows of the joined viewers (bound ``viewers``) and one
    OTHER_DELETERS row per deleted seq, plus a row per joined viewer's floor (bound
    ``floor_viewers``; a viewer without one has none).
    """
    w = _counters(schema)
    at = pulled_at(w, db, shape)
    source = pulled_rows(db, shape)
    width = len(ROW_COLUMNS)
    no_marks = [null() for _ in range(3)]
    blank = [null() for _ in range(width)]
    rows = message_part(w, source(schema.messages), at)
    viewers: Any = bindparam("viewers", expanding=True)
    found, deletions = source(schema.deletions)
    own = (
        select(*no_marks, literal_column(str(DELETION)), deletions.c.seq, deletions.c.user_id)
        .add_columns(*blank)
        .select_from(w.join(found, at(deletions) & deletions.c.user_id.in_(viewers)))
    )
    found, deletions = source(schema.deletions)
    others = (
        select(*no_marks, literal_column(str(DELETION)), deletions.c.seq)
        .add_columns(cast(literal(OTHER_DELETERS), String), *blank)
        .select_from(w.join(found, at(deletions)))
        .group_by(deletions.c.seq)
    )
    found, readers = source(schema.readers)
    read = (
        select(*no_marks, literal_column(str(READER)), readers.c.seq, readers.c.user_id)
        .add_columns(*blank)
        .select_from(w.join(found, at(readers)))
    )
    users = schema.user_seqs
    floors = (
        select(null(), null(), users.c.min_seq, literal_column(str(_FLOOR)), null())
        .add_columns(users.c.user_id, *blank)
        .where(
            users.c.conversation_id == bindparam("conversation_id"),
            users.c.user_id.in_(bindparam("floor_viewers", expanding=True)),
        )
    )
    return union_all(rows, own, others, read, floors)


def _counters(schema: RowSchema) -> Subquery:
    """The conversation's max_seq and min_seq as a one-row derived table ``w``.

    Its ``user_min_seq`` is 0: the herd's rows are clamped by the conversation's floor, and
    each viewer's own floor is applied to them afterwards.
    """
    seqs = schema.seqs.name
    conversation = "conversation_id = :conversation_id"
    sql = (
        f"SELECT COALESCE((SELECT max_seq FROM {seqs} WHERE {conversation}), 0) AS max_seq, "
        f"COALESCE((SELECT min_seq FROM {seqs} WHERE {conversation}), 0) AS min_seq, "
        "0 AS user_min_seq"
    )
    names = ("max_seq", "min_seq", "user_min_seq")
    return text(sql).columns(*(column(name, BigInteger) for name in names)).subquery("w")
