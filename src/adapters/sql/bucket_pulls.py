"""sql-bucket: a herd of pulls of one conversation answered by one statement.

The statement reads the conversation's counters, every joined viewer's clear floor, the
candidate buckets whole (as ``SqlBucketRepository.view`` reads one viewer's) and the
joined viewers' side-table entries of those buckets. Each bucket is decoded once and each
slot built once; a viewer's answer is then cut from them: its visible seqs, its own
deletions (``viewed_deleters``), its own spilled entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.sql.elements import TextClause

from imbucket.adapters.codec import CODECS
from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.adapters.sql.bucket_json import json_text, loads
from imbucket.adapters.sql.dialects import Kind
from imbucket.adapters.sql.json_sql import MARIADB_VIEW, POSTGRES_VIEW, SQLITE_VIEW, ViewSql
from imbucket.adapters.sql.schema import BucketSchema, check_key
from imbucket.domain.model import Pick, Slot, Watermarks, viewed_deleters
from imbucket.ports.view_reads import View

_VIEW: dict[Kind, ViewSql] = {
    "postgresql": POSTGRES_VIEW,
    "mariadb": MARIADB_VIEW,
    "sqlite": SQLITE_VIEW,
}
# NULLs typed for PostgreSQL, which unifies a UNION's columns pair by pair; MariaDB's bare
# NULL yields to any column's type and collation (a cast one would clash with the columns').
_NULLS: dict[Kind, tuple[str, str]] = {
    "postgresql": ("CAST(NULL AS bigint)", "CAST(NULL AS text)"),
    "mariadb": ("NULL", "NULL"),
    "sqlite": ("NULL", "NULL"),
}
# Row kinds of the herd statement: (kind, number, other, name, body).
_COUNTERS, _FLOOR, _BUCKET, _SPILLED = 0, 1, 2, 3


class SqlBucketPulls:
    """``SharedViewReads`` of a ``SqlBucketStore``: one statement for many viewers."""

    def __init__(self, store: SqlBucketStore) -> None:
        self.store = store
        repository = store.repository
        self.db = repository.db
        self.layout = repository.layout
        self._codec = CODECS[self.layout.encoding]
        self._deleters = self._codec.key("del_list")
        kind = self.db.kind
        self._latest = _herd(repository.schema, self.layout.size, kind, latest=True)
        self._listed = _herd(repository.schema, self.layout.size, kind, latest=False)

    def view_many(
        self, conversation_id: str, viewer_ids: Sequence[str], pick: Pick
    ) -> dict[str, View]:
        """Each viewer's ``view``, all from one statement; see SharedViewReads.view_many."""
        check_key(conversation_id, "conversation_id")
        viewers = list(dict.fromkeys(check_key(v, "user_id") for v in viewer_ids))
        if not pick.latest and not pick.seqs:  # nothing to share but the watermarks
            return {v: self.store.view(conversation_id, v, pick) for v in viewers}
        params: dict[str, Any] = {
            "conversation_id": conversation_id,
            "viewers": viewers,
            "spill_viewers": viewers,
        }
        size = self.layout.size
        if pick.latest:
            statement = self._latest
            params.update(
                count=pick.latest, docs=json_text(list(range(-(-pick.latest // size) + 1)))
            )
        else:
            statement = self._listed
            params["docs"] = json_text(sorted({self.layout.doc_index(s) for s in pick.seqs}))
        rows = self.db.execute(statement, params).rows
        return self._answers(conversation_id, viewers, pick, rows)

    def _answers(
        self, conversation_id: str, viewers: list[str], pick: Pick, rows: Sequence[Any]
    ) -> dict[str, View]:
        """Every viewer's view from the herd statement's rows."""
        max_seq = min_seq = 0
        floors: dict[str, int] = {}
        slots: dict[int, tuple[Slot, frozenset[str]]] = {}
        spilled: set[tuple[int, int, str]] = set()
        for kind, number, other, name, body in rows:
            if kind == _COUNTERS:
                max_seq, min_seq = int(number), int(other)
            elif kind == _FLOOR:
                floors[name] = int(other)
            elif kind == _BUCKET:
                slots.update(self._bucket(conversation_id, int(number), body))
            else:
                spilled.add((int(other), int(number), name))
        answers: dict[str, View] = {}
        for viewer in viewers:
            marks = Watermarks(max_seq, min_seq, floors.get(viewer, 0))
            answers[viewer] = self._view(conversation_id, viewer, pick, marks, slots, spilled)
        return answers

    def _bucket(
        self, conversation_id: str, doc_index: int, body: Any
    ) -> dict[int, tuple[Slot, frozenset[str]]]:
        """The slots holding something of one bucket, by seq, each with its inline deleters."""
        whole = loads(body)
        first = self.layout.first_seq(doc_index)
        from_doc, deleters = self._codec.from_doc, self._deleters
        found: dict[int, tuple[Slot, frozenset[str]]] = {}
        for index, doc in enumerate(whole):
            if not doc:
                continue
            deleted = doc.pop(deleters, None)
            seq = first + index
            found[seq] = (from_doc(conversation_id, seq, doc), frozenset(deleted or ()))
        return found

    def _view(
        self,
        conversation_id: str,
        viewer: str,
        pick: Pick,
        marks: Watermarks,
        slots: dict[int, tuple[Slot, frozenset[str]]],
        spilled: set[tuple[int, int, str]],
    ) -> View:
        """One viewer's view: its seqs of the shared slots, scoped to it."""
        layout = self.layout
        seqs = pick.of(marks)
        found: dict[int, Slot] = {}
        settled: dict[str, dict[int, set[str]]] = {}
        for seq in seqs:
            entry = slots.get(seq)
            if entry is None:
                continue
            slot, deleted = entry
            if deleted:  # the viewer sees only whether it deleted, and whether anyone did
                slot = replace(slot, deleted_by=viewed_deleters(viewer, viewer in deleted, True))
            if slot.spilled:
                doc_index, index = divmod(seq - 1, layout.size)
                doc_id = layout.doc_id_for_index(conversation_id, doc_index)
                mine = (doc_index, index, viewer) in spilled
                settled.setdefault(doc_id, {})[index] = {viewer} if mine else set()
            found[seq] = slot
        return marks, self.store.viewed_seqs(conversation_id, seqs, found, viewer, settled)


def _herd(schema: BucketSchema, size: int, kind: Kind, latest: bool) -> TextClause:
    """The herd statement: counters, floors, candidate buckets and spilled entries.

    Rows are (kind, number, other, name, body): the counters (max_seq, min_seq); a viewer's
    floor (its id, its min_seq); a bucket (its index, its JSON text); a side-table entry
    of a joined viewer (slot index, bucket index, user id). Candidates are chosen as in
    ``ViewSql.statement``, from the conversation's floor: every viewer's seqs lie among them.
    """
    spelling = _VIEW[kind]
    null_int, null_text = _NULLS[kind]
    seqs, users = schema.seqs.name, schema.user_seqs.name
    conversation = "conversation_id = :conversation_id"
    counters = (
        f"SELECT COALESCE((SELECT max_seq FROM {seqs} WHERE {conversation}), 0) AS max_seq, "
        f"COALESCE((SELECT min_seq FROM {seqs} WHERE {conversation}), 0) AS min_seq LIMIT 1"
    )
    divide = spelling.divide_sql.format
    last = divide(left="w.max_seq - 1", right=size)
    if latest:
        index = f"({last} - c.j)"
        low = f"{spelling.greatest}(w.max_seq - :count + 1, w.min_seq, 1)"
    else:
        index = "c.j"
        low = f"{spelling.greatest}(w.min_seq, 1)"
    first = divide(left=f"{low} - 1", right=size)
    doc_id = spelling.doc_id_sql.format(index=index)
    candidates = (
        f"FROM ({counters}) AS w JOIN {spelling.candidates_sql}"
        f" ON {index} >= {first} AND {index} <= {last}"
    )
    bucket = spelling.bucket_sql.format(table=schema.docs.name, doc_id=doc_id)
    text_sql = spelling.text_sql
    sql = " UNION ALL ".join(
        (
            f"SELECT {_COUNTERS} AS kind, w.max_seq AS number, w.min_seq AS other,"
            f" {null_text} AS name, {null_text} AS body FROM ({counters}) AS w",
            f"SELECT {_FLOOR}, {null_int}, u.min_seq, u.user_id, {null_text} FROM {users} AS u"
            f" WHERE u.{conversation} AND u.user_id IN :viewers",
            f"SELECT {_BUCKET}, {index}, {null_int}, {null_text}, {text_sql}"
            f" {candidates} JOIN {bucket}",
            f"SELECT {_SPILLED}, s.slot, {index}, s.user_id, {null_text} {candidates}"
            f" JOIN {schema.spill.name} AS s ON s.doc_id = {doc_id}"
            " AND s.user_id IN :spill_viewers",
        )
    )
    return text(sql).bindparams(
        bindparam("viewers", expanding=True), bindparam("spill_viewers", expanding=True)
    )
