"""sql-row's scan (``MessageStore.scan``): pages of every stored slot in key order.

A page is two statements: the first ``limit`` message rows after the cursor (an ordered
range of the primary key), and the first ``limit`` rows of each tag table (deleters, early
readers) after it. The page ends where every table's rows are known to be complete — the
last message row read, or before the last key of a tag table that filled its limit (that
key's other users may follow) — and after at most ``limit`` keys. Only a tag table holding
more than ``limit`` rows for one key leaves nothing complete; that page is read as its
keys, then every row of the key range they span.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    Select,
    String,
    bindparam,
    cast,
    literal_column,
    null,
    select,
    tuple_,
    union,
    union_all,
)

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row_reads import (
    DELETION,
    MESSAGE,
    READER,
    ROW_COLUMNS,
    row_slot,
    row_slots,
)
from imbucket.adapters.sql.schema import RowSchema
from imbucket.domain.scan import ScannedSlot, SlotPage, scanned_slot

Key = tuple[str, int]
_KEY = itemgetter(0, 2)  # a scan row's (conversation_id, seq)


class RowScan:
    """The scan statements of one sql-row store, built once and bound per page."""

    def __init__(self, db: Database, schema: RowSchema) -> None:
        self.db = db
        self._heads = tuple(heads(schema, (MESSAGE,), after=after) for after in (False, True))
        self._tag_heads = tuple(
            heads(schema, (DELETION, READER), after=after) for after in (False, True)
        )
        self._key_pages = (_key_page(schema, after=False), _key_page(schema, after=True))
        self._spans = (_span(schema, after=False), _span(schema, after=True))

    def page(self, after: str | None, limit: int) -> SlotPage:
        """The page after cursor after (None: the first); see ``MessageStore.scan``."""
        start = None if after is None else tuple(json.loads(after))
        params: dict[str, Any] = {"limit": limit}
        if start is not None:
            params.update(first_conversation=start[0], first_seq=start[1])
        shape = start is not None
        messages = self.db.fetch_raw(self._heads[shape], params)
        cut = page_cut(messages, self.db.fetch_raw(self._tag_heads[shape], params), limit)
        if cut is None:
            return self.by_keys(params, limit)
        rows, last = cut
        cursor = None if last is None else json.dumps([last[0], int(last[1])])
        scanned = tagged_slots(rows) if rows is not messages else _untagged_slots(rows)
        return SlotPage(tuple(scanned), cursor)

    def by_keys(self, params: dict[str, Any], limit: int) -> SlotPage:
        """The page as its keys, then every row of the key range they span.

        params: the page's (``limit``, and ``first_conversation``, ``first_seq`` after a cursor).
        """
        after = "first_seq" in params
        keys = self.db.fetch_raw(self._key_pages[after], params)
        if not keys:
            return SlotPage((), None)
        last_conversation, last_seq = keys[-1][0], int(keys[-1][1])
        params = {**params, "last_conversation": last_conversation, "last_seq": last_seq}
        scanned = scanned_slots(sorted(self.db.fetch_raw(self._spans[after], params), key=_KEY))
        cursor = json.dumps([last_conversation, last_seq]) if len(keys) == limit else None
        return SlotPage(tuple(scanned), cursor)


def page_cut(
    messages: Sequence[Sequence[Any]], tags: Sequence[Sequence[Any]], limit: int
) -> tuple[Sequence[Any], Key | None] | None:
    """The rows of a page's complete keys, in key order, and its last key (None: the end).

    messages are the first limit message rows after the cursor, in key order; tags the
    first limit rows of each tag table after it. The rows returned are messages itself
    when no tag row was read. None when no key is complete (a tag table's limit rows all
    of one key).
    """
    if not tags:  # the usual page: message rows only, one per key, in order (returned as is)
        return messages, (_KEY(messages[-1]) if len(messages) == limit else None)
    ends: list[tuple[Key, bool]] = []  # (key, whether rows of that key are complete)
    if len(messages) == limit:
        ends.append((_KEY(messages[-1]), True))
    for kind in (DELETION, READER):
        keys = [_KEY(row) for row in tags if row[1] == kind]
        if len(keys) == limit:
            ends.append((max(keys), False))
    ordered = sorted([*messages, *tags], key=_KEY)
    kept = ordered
    if ends:
        end, complete = min(ends)  # at one key, the incomplete bound sorts first
        kept = [row for row in ordered if _KEY(row) < end or (complete and _KEY(row) == end)]
        if not kept:
            return None
    keys = list(dict.fromkeys(map(_KEY, kept)))
    if len(keys) > limit:
        last = keys[limit - 1]
        return [row for row in kept if _KEY(row) <= last], last
    return kept, (keys[-1] if ends else None)


def scanned_slots(rows: Sequence[Sequence[Any]]) -> list[ScannedSlot]:
    """The slots of a page's rows (in key order), empty ones left out.

    Rows are (conversation_id, kind, seq, user_id, *ROW_COLUMNS), as ``row_slots`` reads
    them after the conversation id. A range of message rows alone (the usual page) is built
    in one pass; one with deleter or reader rows is grouped by conversation for ``row_slots``.
    """
    if any(row[1] != MESSAGE for row in rows):
        return tagged_slots(rows)
    return _untagged_slots(rows)


def _untagged_slots(rows: Sequence[Sequence[Any]]) -> list[ScannedSlot]:
    """``scanned_slots`` of message rows alone, in one pass."""
    scanned: list[ScannedSlot] = []
    add = scanned.append
    for row in rows:
        conversation_id, seq = row[0], row[2]
        slot = row_slot(conversation_id, seq, row, 4)
        if slot.message is not None or not slot.is_empty:
            add(scanned_slot(conversation_id, seq, slot))
    return scanned


def tagged_slots(rows: Sequence[Sequence[Any]]) -> list[ScannedSlot]:
    """``scanned_slots`` of rows holding deleter or reader rows (any order)."""
    by_conversation: dict[str, list[Sequence[Any]]] = {}
    for row in rows:
        found = by_conversation.get(row[0])
        if found is None:
            found = by_conversation[row[0]] = []
        found.append(row)
    scanned: list[ScannedSlot] = []
    for conversation_id in sorted(by_conversation):
        slots = row_slots(conversation_id, by_conversation[conversation_id], 1)
        scanned += [scanned_slot(conversation_id, s, slots[s]) for s in sorted(slots)]
    return scanned


def _row_columns(table: Any, kind: int) -> list[Any]:
    """A table's columns (or a subquery's of them) in a scan row, by kind.

    (conversation_id, kind, seq, user_id, *ROW_COLUMNS): NULL where the table has none.
    """
    rest: list[Any] = (
        [cast(null(), String).label("user_id"), *(table.c[n] for n in ROW_COLUMNS)]
        if kind == MESSAGE
        else [table.c.user_id, *(null() for _ in ROW_COLUMNS)]
    )
    return [table.c.conversation_id, literal_column(str(kind)).label("kind"), table.c.seq, *rest]


_TABLES = ("messages", "deletions", "readers")  # by kind


def heads(
    schema: RowSchema, kinds: tuple[int, ...], *, after: bool
) -> Select[Any] | CompoundSelect[Any]:
    """The first bound ``limit`` rows of each table of kinds in key order, after the bound key.

    One table is one plain ordered range; several are a UNION ALL of such ranges.
    """
    parts = []
    for kind in kinds:
        table = getattr(schema, _TABLES[kind])
        key = (table.c.conversation_id, table.c.seq)
        if len(kinds) == 1:
            part = select(*_row_columns(table, kind))
        else:
            stored = ROW_COLUMNS if kind == MESSAGE else ("user_id",)
            part = select(*key, *(table.c[name] for name in stored))
        if after:
            first = tuple_(bindparam("first_conversation"), bindparam("first_seq"))
            part = part.where(tuple_(*key) > first)
        order = key if kind == MESSAGE else (*key, table.c.user_id)
        part = part.order_by(*order).limit(bindparam("limit"))
        if len(kinds) == 1:
            return part
        parts.append(select(*_row_columns(part.subquery(), kind)))
    return union_all(*parts)


def _key_page(schema: RowSchema, *, after: bool) -> Select[Any]:
    """The first bound ``limit`` (conversation_id, seq) keys any table holds.

    After the bound first key when after (built once per shape, bound per page).
    """
    parts = []
    for table in (schema.messages, schema.deletions, schema.readers):
        key = (table.c.conversation_id, table.c.seq)
        part = select(*key).order_by(*key).limit(bindparam("limit"))
        if after:
            first = tuple_(bindparam("first_conversation"), bindparam("first_seq"))
            part = part.where(tuple_(*key) > first)
        parts.append(select(part.subquery()))
    keys = union(*parts).subquery()
    return select(keys.c.conversation_id, keys.c.seq).order_by(*keys.c).limit(bindparam("limit"))


def _span(schema: RowSchema, *, after: bool) -> CompoundSelect[Any]:
    """Every row of the three tables in a bound key range (scan rows, in no order).

    Keys up to the bound last key and (after) beyond the bound first key. The plain
    conversation_id bounds give every engine a range of the primary key to scan; the key
    comparisons make it exact.
    """
    parts = []
    for kind in (MESSAGE, DELETION, READER):
        table = getattr(schema, _TABLES[kind])
        columns = _row_columns(table, kind)
        key = tuple_(table.c.conversation_id, table.c.seq)
        last = tuple_(bindparam("last_conversation"), bindparam("last_seq"))
        where = [table.c.conversation_id <= bindparam("last_conversation"), key <= last]
        if after:
            first = tuple_(bindparam("first_conversation"), bindparam("first_seq"))
            where += [table.c.conversation_id >= bindparam("first_conversation"), key > first]
        parts.append(select(*columns).where(*where))
    return union_all(*parts)
