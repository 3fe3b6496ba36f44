"""sql-row's scan as RowPages (``ports.bulk_load.RowExport``): plain slots left as their rows.

A page is the scan page of ``row_scan`` (same statements' shape, same cut, same cursor),
but its message rows are read as ``COPIED_ROW`` — ``(conversation_id, seq, *ROW_COLUMNS)``,
the columns in the message table's own terms — and handed out as they are, unless their key
also has deleter or early-reader rows: those keys are decoded into slots. Only a page the
scan reads by its keys (a tag table holding more than ``limit`` rows of one key) comes
decoded whole.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select, bindparam, select, tuple_

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row_reads import (
    DELETION,
    MESSAGE,
    READER,
    ROW_COLUMNS,
    row_holds_something,
    row_message_count,
    row_slot,
)
from imbucket.adapters.sql.row_scan import RowScan, heads, tagged_slots
from imbucket.adapters.sql.schema import RowSchema
from imbucket.domain.scan import RowPage, ScannedSlot, SlotPage, scanned_slot

# The form of the rows of sql-row's RowPages, and their columns.
ROW_FORM = "sql-row message rows"
COPIED_ROW = ("conversation_id", "seq", *ROW_COLUMNS)
START = 2  # where ROW_COLUMNS start in a copied row
_SEND_ID = START + ROW_COLUMNS.index("send_id")

Key = tuple[str, int]


class RowPages:
    """The RowPage statements of one sql-row store, built once and bound per page."""

    def __init__(self, db: Database, schema: RowSchema, scan: RowScan) -> None:
        self.db = db
        self._scan = scan
        self._messages = (_message_rows(schema, after=False), _message_rows(schema, after=True))
        self._tags = tuple(heads(schema, (DELETION, READER), after=a) for a in (False, True))

    def page(self, after: str | None, limit: int, align: int = 1) -> RowPage:
        """The RowPage after cursor after (None: the first); see ``RowExport.scan_rows``."""
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            first_conversation, first_seq = json.loads(after)
            params.update(first_conversation=first_conversation, first_seq=first_seq)
        shape = after is not None
        messages = self.db.fetch_raw(self._messages[shape], params)
        tags = self.db.fetch_raw(self._tags[shape], params)
        if not tags:  # the usual page: message rows only, one per key, in order
            last = (messages[-1][0], messages[-1][1]) if len(messages) == limit else None
            kept, _, last = _aligned(messages, [], last, align)
            return _row_page(_plain(kept), (), last)
        cut = _cut(messages, tags, limit)
        if cut is None:
            return _decoded(self._scan.by_keys(params, limit))
        kept, tagged, last = _aligned(*cut, align)
        keys = {(row[0], row[2]) for row in tagged}
        plain = [row for row in kept if (row[0], row[1]) not in keys]
        scan_rows = [_scan_row(row) for row in kept if (row[0], row[1]) in keys]
        return _row_page(_plain(plain), tuple(tagged_slots([*scan_rows, *tagged])), last)


def slots_of(
    rows: Sequence[Sequence[Any]], skip: Mapping[str, set[int]] | None = None
) -> list[ScannedSlot]:
    """The slots of a RowPage's rows, but those at skip's seqs (``RowExport.slots_of``)."""
    if skip:
        rows = [row for row in rows if row[1] not in skip.get(row[0], ())]
    return [scanned_slot(row[0], row[1], row_slot(row[0], row[1], row, START)) for row in rows]


def _cut(
    messages: Sequence[Sequence[Any]], tags: Sequence[Sequence[Any]], limit: int
) -> tuple[Sequence[Any], list[Sequence[Any]], Key | None] | None:
    """``row_scan.page_cut`` of copied message rows and scan tag rows, kept apart.

    The message rows of the page's complete keys (a prefix: they come in key order), its
    tag rows, and its last key (None: the end). None when no key is complete.
    """
    ends: list[tuple[Key, bool]] = []  # (key, whether rows of that key are complete)
    if len(messages) == limit:
        ends.append(((messages[-1][0], messages[-1][1]), True))
    for kind in (DELETION, READER):
        keys = [(row[0], row[2]) for row in tags if row[1] == kind]
        if len(keys) == limit:
            ends.append((max(keys), False))
    kept, tagged = messages, list(tags)
    if ends:
        end, complete = min(ends)  # at one key, the incomplete bound sorts first
        kept = _through(messages, end, complete)
        tagged = [t for t in tags if (t[0], t[2]) < end or (complete and (t[0], t[2]) == end)]
        if not kept and not tagged:
            return None
    message_keys = {(row[0], row[1]) for row in kept} if tagged else set()
    extra = sorted({(t[0], t[2]) for t in tagged} - message_keys)
    if len(kept) + len(extra) > limit:
        last = sorted([*((row[0], row[1]) for row in kept), *extra])[limit - 1]
        kept = _through(kept, last, True)
        return kept, [t for t in tagged if (t[0], t[2]) <= last], last
    if not ends:
        return kept, tagged, None
    every = [*(((kept[-1][0], kept[-1][1]),) if kept else ()), *extra[-1:]]
    return kept, tagged, max(every)


def _aligned(
    kept: Sequence[Sequence[Any]], tagged: list[Sequence[Any]], last: Key | None, align: int
) -> tuple[Sequence[Any], list[Sequence[Any]], Key | None]:
    """A page's rows cut back to before the unit of align seqs its last key falls inside.

    So that no unit of a target (a bucket of align slots) is split between two pages. A page
    that ends the scan, ends a unit, or holds nothing before that unit stays as it is; else
    its new last key is the seq before the unit (the next page starts at the unit).
    """
    if last is None or align <= 1 or last[1] % align == 0:
        return kept, tagged, last
    conversation, seq = last
    first = (conversation, seq - (seq - 1) % align)  # the key of the unit's first seq
    before = _through(kept, first, False)
    earlier = [row for row in tagged if (row[0], row[2]) < first]
    if not before and not earlier:
        return kept, tagged, last
    return before, earlier, (conversation, first[1] - 1)


def _through(rows: Sequence[Sequence[Any]], end: Key, inclusive: bool) -> Sequence[Any]:
    """The prefix of key-ordered copied rows below end (up to it when inclusive)."""
    find = bisect.bisect_right if inclusive else bisect.bisect_left
    return rows[: find(rows, end, key=lambda row: (row[0], row[1]))]


def _plain(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """The rows whose slot holds anything (a message row always does)."""
    return [row for row in rows if row[_SEND_ID] is not None or row_holds_something(row, START)]


def _row_page(
    rows: list[Sequence[Any]], slots: tuple[ScannedSlot, ...], last: Key | None
) -> RowPage:
    """A RowPage of plain rows and decoded slots, ending at last (None: the scan's end)."""
    cursor = None if last is None else json.dumps([last[0], int(last[1])])
    ids: list[str] = [row[0] for row in rows]
    if slots:
        keyed = [(row[0], row[1]) for row in rows]
        ids = [conv for conv, _ in sorted(keyed + [(i.conversation_id, i.seq) for i in slots])]
    messages = row_message_count(rows, START) + _messages(slots)
    return RowPage(ROW_FORM, rows, slots, cursor, ids, messages)


def _decoded(page: SlotPage) -> RowPage:
    """A scan page (``SlotPage``) as a RowPage of slots only."""
    ids = [item.conversation_id for item in page.slots]
    return RowPage(ROW_FORM, (), page.slots, page.cursor, ids, _messages(page.slots))


def _messages(slots: Sequence[ScannedSlot]) -> int:
    return sum(1 for item in slots if item.slot.message is not None)


def _scan_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """A copied message row as a scan row (conversation_id, kind, seq, user_id, *ROW_COLUMNS)."""
    return (row[0], MESSAGE, row[1], None, *row[START:])


def _message_rows(schema: RowSchema, *, after: bool) -> Select[Any]:
    """The first bound ``limit`` message rows as copied rows, in key order, after the bound key."""
    table = schema.messages
    key = (table.c.conversation_id, table.c.seq)
    statement = select(*(table.c[name] for name in COPIED_ROW))
    if after:
        first = tuple_(bindparam("first_conversation"), bindparam("first_seq"))
        statement = statement.where(tuple_(*key) > first)
    return statement.order_by(*key).limit(bindparam("limit"))
