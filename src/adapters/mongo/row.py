"""RowRepository with one document per message: ``{_id: {c, s}, msg, revoke, del_list, ...}``.

The alternative the article rejects, kept to measure it. A row has the slot shape of a
bucket slot; tags written before the message create the row by upsert, and the message
then fills it. Every call addresses rows by _id, the shard key. ``RowMessageStore``
(adapters/row.py) runs the insert state machine and the tag rules over it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pymongo.errors import DuplicateKeyError

from imbucket.adapters import contention
from imbucket.adapters.codec import slot_from_doc
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.mongo.mark_read_writes import RidingWrites
from imbucket.adapters.mongo.read_marks import raise_needed
from imbucket.adapters.mongo.replies import ReaderMarks, marked_reply, row_slots, store_stats
from imbucket.adapters.row import RowMessageStore
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Message, Revoke, Slot, SlotPatch, StoreStats
from imbucket.domain.scan import ScannedSlot, SlotPage
from imbucket.domain.tags import MAX_ROUNDS, Guard, checked_beyond, marking_read

_BULK = 200  # upserts one insert_new_many command carries at most


class MongoRowRepository:
    """RowRepository on collection ``msg_row``, clustered on _id when the server can (>= 5.3)."""

    def __init__(self, connection: MongoConnection, layout: BucketLayout) -> None:
        self.layout = layout
        self._connection = connection
        options = commands.row_collection_options(connection.version())
        # An existing collection is kept as it was created, clustered or not.
        created = connection.ensure_collection(commands.ROWS, options)
        self._clustered = "clusteredIndex" in created
        # The bucket size shapes what callers see (doc ids, inspect): refuse another one.
        connection.ensure_layout(commands.ROWS, layout)
        self._rows = connection.collection(commands.ROWS)
        self.riding = RidingWrites(self._rows)
        self.users = commands.UserDocs(commands.ROWS)

    def insert_new(self, conversation_id: str, messages: Sequence[Message]) -> set[int]:
        """One unordered bulk write of conditional upserts, one per message.

        Each creates its row, or fills a row holding only tags (written before the message),
        so a batch costs one write either way; a row holding a message or purged makes its
        upsert collide on _id.
        """
        if not messages:
            return set()
        fills = [commands.fill_row(conversation_id, m) for m in messages]
        return {messages[i].seq for i in self._bulk_upsert(fills, "insert messages")}

    def insert_new_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, set[int]]:
        """The upserts of every conversation in one unordered bulk write."""
        keys = [(conv, m.seq) for conv, messages in batches.items() for m in messages]
        if not keys:
            return {}
        fills = [commands.fill_row(conv, m) for conv, ms in batches.items() for m in ms]
        missed: dict[str, set[int]] = {}
        # Commands of at most _BULK upserts each, so that each reply comes within the timeout.
        for start in range(0, len(fills), _BULK):
            for position in self._bulk_upsert(fills[start : start + _BULK], "insert messages"):
                conv, seq = keys[start + position]
                missed.setdefault(conv, set()).add(seq)
        return missed

    def read_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """One find with ``_id: {$in}`` over every conversation's rows."""
        ids = [commands.row_id(conv, seq) for conv, seqs in wanted.items() for seq in seqs]
        if not ids:
            return {}
        found: dict[str, dict[int, Slot]] = {}
        with translated("read messages"):
            for doc in self._rows.find({"_id": {"$in": ids}}):
                conv = doc["_id"]["c"]
                found.setdefault(conv, {})[int(doc["_id"]["s"])] = slot_from_doc(conv, doc)
        return found

    def read(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """One find with ``_id: {$in}``.

        For a viewer an aggregate with ``$in`` on ``del_list``: no deleter list travels.
        """
        if not seqs:
            return {}
        with translated("read messages"):
            if viewer is not None:
                pipeline = commands.viewed_rows(conversation_id, seqs, viewer)
                return row_slots(self._rows.aggregate(pipeline))
            return row_slots(self._rows.find(commands.rows_in(conversation_id, seqs)))

    def read_marked(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str
    ) -> tuple[dict[int, Slot], ReaderMarks]:
        """``read`` (no viewer) with max_seq and reader_id's read seq: one aggregate.

        See ``imbucket.adapters.mongo.read_marks``.
        """
        pipeline = commands.marked_rows(conversation_id, reader_id, seqs)
        with translated("read messages"):
            found = list(self._rows.aggregate(pipeline, batchSize=len(seqs) + 2))
        marks, rows = marked_reply(found, "_id")
        return row_slots(rows), marks

    def read_state(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """The same find as ``read``: a document holds its tags."""
        return self.read(conversation_id, seqs)

    def fill(self, conversation_id: str, message: Message) -> bool:
        """One conditional upsert; a collision on _id means the row holds a message or purged."""
        return self._upsert(commands.fill_row(conversation_id, message), "store a message")

    def set_revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """One conditional upsert; a collision on _id means revoked or purged, or a race."""
        command = commands.revoke_row(conversation_id, seq, revoke)
        if self._upsert(command, "revoke"):
            return True
        contention.record(contention.ROW_UPSERT_LOST)
        return False

    def patch(self, conversation_id: str, patches: Mapping[int, SlotPatch]) -> int:
        """Upsert every change in one unordered bulk write; counts every patch."""
        pending = [commands.patch_row(conversation_id, seq, p) for seq, p in patches.items()]
        for _ in range(MAX_ROUNDS):
            if not pending:
                return len(patches)
            # Two first upserts of one _id may collide; the retry finds the row.
            pending = [pending[i] for i in self._bulk_upsert(pending, "write tags")]
            contention.record(contention.ROW_UPSERT_LOST, len(pending))
        raise StoreUnavailable(f"tag write to {conversation_id} did not settle under contention")

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """One find over ``msg_row`` in _id order; rows holding nothing are left out."""
        found, cursor = self._connection.scan(commands.ROWS, after, limit)
        slots = [
            ScannedSlot(doc["_id"]["c"], doc["_id"]["s"], slot_from_doc(doc["_id"]["c"], doc))
            for doc in found
        ]
        return SlotPage(tuple(s for s in slots if not s.slot.is_empty), cursor)

    def stats(self) -> StoreStats:
        """``$collStats`` storage stats plus a count of stored messages (a full scan)."""
        with translated("read collection stats"):
            storage = list(self._rows.aggregate(commands.STORAGE_STATS))
            counted = list(self._rows.aggregate(commands.COUNT_ROW_MESSAGES))
        return store_stats(storage, counted, clustered=self._clustered)

    @property
    def connection(self) -> MongoConnection:
        """The client and database (for instrumentation such as the benchmark's raw arm)."""
        return self._connection

    def close(self) -> None:
        """Close the client."""
        self._connection.close()

    def _upsert(self, command: commands.Update, action: str) -> bool:
        """Run a conditional upsert; False when the row exists but fails the condition."""
        with translated(action):
            try:
                self._rows.update_one(command.filter, command.update, upsert=command.upsert)
            except DuplicateKeyError:
                return False
        return True

    def _bulk_upsert(self, updates: Sequence[commands.Update], action: str) -> list[int]:
        """One unordered bulk_write (a waiting rider with it); the updates that collided on _id."""
        return self.riding.bulk_write(updates, action).collided


class MongoRowStore(RowMessageStore):
    """The row state machine's MessageStore over a MongoRowRepository."""

    repository: MongoRowRepository

    def __init__(self, repository: MongoRowRepository) -> None:
        super().__init__(repository)

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """See ``MarkingStore.mark_read_raising``."""
        found, marks = self.repository.read_marked(conversation_id, seqs, reader_id)
        checked = checked_beyond(guard, marks.max_seq)
        rider = raise_needed(self.repository.users, conversation_id, reader_id, seqs, marks)
        with self.repository.riding.carrying(rider):
            return self._apply_read(found, conversation_id, seqs, marking_read(reader_id), checked)
