"""The SQL stores' bulk path (``imbucket.ports.bulk_load``): units the target lacks, loaded whole.

One load is one unit of work on one connection: a read of which of the given units exist
(rows by key, buckets by doc_id), then the rows of the others, table by table, by the
engine's bulk path (``bulk_rows.write_rows``). Outside a batch the load is its own
transaction; inside one it joins it. A unit found present is left to the caller, so
nothing stored is ever overwritten. The seq store's counterpart is ``SqlSeqStore``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select, union_all

from imbucket.adapters.codec import Doc, compact_row_doc, compact_usual, push_to_doc
from imbucket.adapters.sql.bucket_json import json_text
from imbucket.adapters.sql.bulk_rows import HeldRead, write_rows
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.row_pages import COPIED_ROW, START
from imbucket.adapters.sql.row_reads import REVOKE_COLUMNS, row_slot_parts, usual_message_fields
from imbucket.adapters.sql.schema import RowSchema, check_key, message_column
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout, check_seq
from imbucket.domain.model import MESSAGE_FIELDS, Slot

# sql-row's message columns in the order a bulk load sends them: the plain fields (seq
# first) straight from the message, then the three JSON columns, the revoke and the flags.
_JSON_FIELDS = ("options", "offline_push", "at_user_id_list")
_PLAIN_FIELDS = tuple(name for name in MESSAGE_FIELDS if name not in _JSON_FIELDS)
MESSAGE_ROW = (
    "conversation_id",
    *(message_column(name) for name in _PLAIN_FIELDS),
    *_JSON_FIELDS,
    *REVOKE_COLUMNS,
    "is_read",
    "purged",
)
MARK_ROW = ("conversation_id", "seq", "user_id")
_plain = attrgetter(*_PLAIN_FIELDS)  # a message's plain fields in one C call
_ENUMS = tuple(_PLAIN_FIELDS.index(name) for name in ("session_type", "content_type"))
_NO_MESSAGE = (None,) * (len(_PLAIN_FIELDS) - 1 + len(_JSON_FIELDS))
_NO_REVOKE = (None, None, None, None)
_EMPTY_DOC: Doc = {}  # an empty slot of a compact bucket (shared: never changed in place)


def message_row(conversation_id: str, seq: int, slot: Slot) -> tuple[Any, ...] | None:
    """sql-row's message row of a slot (MESSAGE_ROW order); None when the slot needs none.

    A row holds a message, a revoke, is_read or the purge mark; deleters and early readers
    live in their own tables. The JSON columns are written as ``SqlRowRepository`` writes them.
    """
    message, revoke = slot.message, slot.revoke
    revoked: tuple[Any, ...] = (
        _NO_REVOKE
        if revoke is None
        else (revoke.user_id, int(revoke.role), revoke.nickname, revoke.time)
    )
    if message is None:
        if revoke is None and not slot.is_read and not slot.purged:
            return None
        return (conversation_id, seq, *_NO_MESSAGE, *revoked, slot.is_read, slot.purged)
    plain = _plain(message)
    if type(plain[_ENUMS[0]]) is not int or type(plain[_ENUMS[1]]) is not int:
        plain = tuple(int(v) if i in _ENUMS else v for i, v in enumerate(plain))
    options, push, users = message.options, message.offline_push, message.at_user_id_list
    if not options and push is None and not users:
        return (conversation_id, *plain, "{}", None, "[]", *revoked, slot.is_read, slot.purged)
    encoded = (
        json.dumps(dict(options), sort_keys=True) if options else "{}",
        None if push is None else json.dumps(push_to_doc(push)),
        json.dumps(list(users)) if users else "[]",
    )
    return (conversation_id, *plain, *encoded, *revoked, slot.is_read, slot.purged)


class RowBulkLoad:
    """``BulkLoad`` for sql-row: each ``(conversation_id, seq)`` none of its tables holds."""

    def __init__(self, db: Database, schema: RowSchema) -> None:
        self.db = db
        self.schema = schema
        tables = (schema.messages, schema.deletions, schema.readers)
        # The page's conversations over the page's seq range: a superset of its keys, found
        # with index range scans (a list of key pairs is planned as one OR per pair).
        self._held = HeldRead(
            db,
            lambda among: union_all(
                *(
                    select(t.c.conversation_id, t.c.seq).where(
                        among(t.c.conversation_id, "conversations"),
                        t.c.seq.between(bindparam("first"), bindparam("last")),
                    )
                    for t in tables
                )
            ),
        )

    def load_new(self, slots: Mapping[str, Mapping[int, Slot]]) -> dict[str, set[int]]:
        """See ``BulkLoad.load_new``: one key read, then the rows of the keys no table holds."""
        for conversation_id in slots:
            check_key(conversation_id, "conversation_id")
        seqs = [seq for by_seq in slots.values() for seq in by_seq]
        if not seqs:
            return {}
        params = {"conversations": list(slots), "first": min(seqs), "last": max(seqs)}

        def work(connection: Connection) -> dict[str, set[int]]:
            # A continued conversation's earlier rows come back too.
            held = set(map(tuple, self._held.rows(connection, params)))
            return self._write(connection, slots, held)

        # A failed load fails the caller's batch, if any, whole (see ports.bulk_load).
        return self.db.run(work, atomic=True, savepoint=False)

    def _write(
        self,
        connection: Connection,
        slots: Mapping[str, Mapping[int, Slot]],
        held: set[tuple[str, int]],
    ) -> dict[str, set[int]]:
        """The rows of every slot whose key is not held, table by table.

        The message rows are built as the COPY draws them (``write_rows``); the tag rows
        are gathered on the way and written after.
        """
        deletions: list[tuple[Any, ...]] = []
        readers: list[tuple[Any, ...]] = []
        written: dict[str, set[int]] = {}
        held_seqs: dict[str, set[int]] = {}
        for conversation_id, seq in held:
            held_seqs.setdefault(conversation_id, set()).add(seq)

        def messages() -> Iterator[tuple[Any, ...]]:
            for conversation_id, by_seq in slots.items():
                found = held_seqs.get(conversation_id)
                if found is not None and not found.isdisjoint(by_seq):
                    by_seq = {seq: slot for seq, slot in by_seq.items() if seq not in found}
                if not by_seq:
                    continue
                for seq, slot in by_seq.items():
                    row = message_row(conversation_id, seq, slot)
                    if row is not None:
                        yield row
                    if slot.deleted_by:
                        deletions.extend((conversation_id, seq, user) for user in slot.deleted_by)
                    if slot.read_by:
                        readers.extend((conversation_id, seq, user) for user in slot.read_by)
                written[conversation_id] = set(by_seq)

        schema = self.schema
        write_rows(connection, schema.messages, MESSAGE_ROW, messages())
        write_rows(connection, schema.deletions, MARK_ROW, deletions)
        write_rows(connection, schema.readers, MARK_ROW, readers)
        return written

    def load_new_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, set[int]]:
        """``load_new`` of sql-row's own RowPage rows (``COPIED_ROW``), written as they are.

        The flags go as the source's driver gave them (0/1 or booleans: every engine's bulk
        path takes both).
        """
        if not rows:
            return {}
        conversations = list(dict.fromkeys(row[0] for row in rows))
        for conversation_id in conversations:
            check_key(conversation_id, "conversation_id")
        seqs = [row[1] for row in rows]
        params = {"conversations": conversations, "first": min(seqs), "last": max(seqs)}

        def work(connection: Connection) -> dict[str, set[int]]:
            held = set(map(tuple, self._held.rows(connection, params)))
            kept = [row for row in rows if (row[0], row[1]) not in held] if held else rows
            written: dict[str, set[int]] = {}
            for row in kept:
                found = written.get(row[0])
                if found is None:
                    found = written[row[0]] = set()
                found.add(row[1])
            write_rows(connection, self.schema.messages, COPIED_ROW, kept)
            return written

        return self.db.run(work, atomic=True, savepoint=False)


class BucketBulkLoad:
    """``BulkLoad`` for sql-bucket: each bucket with no document, created whole."""

    def __init__(
        self,
        db: Database,
        layout: BucketLayout,
        docs: Table,
        budget: TagBudget,
        whole: Callable[[Mapping[int, Slot]], str],
    ) -> None:
        self.db, self.layout, self.docs, self.budget = db, layout, docs, budget
        self._whole = whole
        self._held = HeldRead(
            db, lambda among: select(docs.c.doc_id).where(among(docs.c.doc_id, "doc_ids"))
        )

    def load_new(self, slots: Mapping[str, Mapping[int, Slot]]) -> dict[str, set[int]]:
        """See ``BulkLoad.load_new``: one doc_id read, then the buckets it did not find."""
        buckets: dict[str, dict[int, Slot]] = {}
        seqs: dict[str, tuple[str, list[int]]] = {}
        tagged: set[str] = set()  # buckets with a deleter or an early reader
        size, doc_id_for_index = self.layout.size, self.layout.doc_id_for_index
        for conversation_id, by_seq in slots.items():
            check_key(conversation_id, "conversation_id")
            if not by_seq:
                continue
            check_seq(min(by_seq))  # the others are larger
            current = -1
            bucket: dict[int, Slot] = {}
            loaded: list[int] = []
            doc_id = ""
            for seq, slot in by_seq.items():
                index, position = divmod(seq - 1, size)  # BucketLayout.place
                if index != current:  # a conversation's seqs come mostly in order
                    current = index
                    doc_id = doc_id_for_index(conversation_id, index)
                    if doc_id not in buckets:
                        buckets[doc_id], seqs[doc_id] = {}, (conversation_id, [])
                    bucket, loaded = buckets[doc_id], seqs[doc_id][1]
                bucket[position] = slot
                loaded.append(seq)
                if slot.deleted_by or slot.read_by:
                    tagged.add(doc_id)
        fitting = [d for d in buckets if d not in tagged or self._inline(buckets[d])]
        return self._create(fitting, lambda doc_id: self._whole(buckets[doc_id]), seqs)

    def load_new_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, set[int]]:
        """``load_new`` of sql-row's RowPage rows (``COPIED_ROW``), built into compact buckets.

        Each row's slot is encoded from its columns (``compact_row_doc``), with no Slot built.
        """
        buckets: dict[str, list[Doc]] = {}
        seqs: dict[str, tuple[str, list[int]]] = {}
        size, doc_id_for_index = self.layout.size, self.layout.doc_id_for_index
        current, current_index = None, -1
        docs: list[Doc] = []
        loaded: list[int] = []
        for row in rows:
            conversation_id, seq = row[0], row[1]
            index, position = divmod(seq - 1, size)  # BucketLayout.place
            if index != current_index or conversation_id != current:  # rows in key order
                current, current_index = conversation_id, index
                check_key(conversation_id, "conversation_id")
                check_seq(seq)
                doc_id = doc_id_for_index(conversation_id, index)
                if doc_id not in buckets:
                    buckets[doc_id], seqs[doc_id] = [_EMPTY_DOC] * size, (conversation_id, [])
                docs, loaded = buckets[doc_id], seqs[doc_id][1]
            usual = usual_message_fields(row, START)
            if usual is None:
                docs[position] = compact_row_doc(*row_slot_parts(row, START))
            else:  # the usual message, encoded without decoding its extras
                docs[position] = {"m": compact_usual(usual)}
            loaded.append(seq)
        return self._create(list(buckets), lambda doc_id: json_text(buckets[doc_id]), seqs)

    def _create(
        self,
        doc_ids: Sequence[str],
        whole: Callable[[str], str],
        seqs: Mapping[str, tuple[str, Sequence[int]]],
    ) -> dict[str, set[int]]:
        """Create each bucket of doc_ids that has no document, as whole(doc_id) gives its text.

        Returns the seqs of the created buckets (seqs: each bucket's conversation and seqs).
        """
        if not doc_ids:
            return {}
        budget = self.db.limits().max_bytes

        def work(connection: Connection) -> dict[str, set[int]]:
            held = {row[0] for row in self._held.rows(connection, {"doc_ids": doc_ids})}
            written: dict[str, set[int]] = {}

            def rows() -> Iterator[tuple[str, str]]:  # encoded as the COPY draws them
                for doc_id in doc_ids:
                    if doc_id in held:
                        continue
                    text = whole(doc_id)
                    if connection.dialect.name != "postgresql" and len(text) * 4 >= budget:
                        continue  # one INSERT must carry it: left to create_bucket's path
                    yield doc_id, text
                    conversation_id, loaded = seqs[doc_id]
                    written.setdefault(conversation_id, set()).update(loaded)

            write_rows(connection, self.docs, ("doc_id", "msgs"), rows())
            return written

        # A failed load fails the caller's batch, if any, whole (see ports.bulk_load).
        return self.db.run(work, atomic=True, savepoint=False)

    def _inline(self, bucket: Mapping[int, Slot]) -> bool:
        """Whether the bucket's deleters and early readers all fit inline (no side table)."""
        budget = self.budget
        deleters = 0
        for slot in bucket.values():
            count = len(slot.deleted_by)
            if count > budget.deleters_per_slot or len(slot.read_by) > budget.readers_per_slot:
                return False
            deleters += count
        return deleters <= budget.deleters_per_bucket
