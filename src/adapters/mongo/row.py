"""MessageStore with one document per message: ``{_id: {c, s}, msg, revoke, del_list, ...}``.

The alternative the article rejects, kept to measure it. A row has the slot shape of a
bucket slot; tags written before the message create the row by upsert, and the message
then fills it. Every call addresses rows by _id, the shard key.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from adapters import contention
from adapters.codec import slot_from_doc
from adapters.mongo import commands
from adapters.mongo.connection import MongoConnection, translated
from adapters.mongo.replies import duplicate_positions, row_slots, store_stats
from domain.errors import StoreUnavailable
from domain.layout import BucketLayout
from domain.model import (
    EMPTY_SLOT,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
)
from domain.scan import ScannedSlot, SlotPage
from domain.tags import MAX_ROUNDS, Decision, TagWrites, classify, deleting_for


class MongoRowMessageStore(TagWrites):
    """Rows in collection ``msg_row``, clustered on _id when the server can (>= 5.3)."""

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

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """One unordered bulk write of conditional upserts, one per message.

        Each creates its row, or fills a row holding only tags (written before the message),
        so a batch costs one write either way; a row holding a message or purged makes its
        upsert collide on _id, and those seqs are read once and classified.
        """
        if not messages:
            return InsertResult()
        fills = [commands.fill_row(conversation_id, m) for m in messages]
        taken = self._bulk_upsert(fills, "insert messages")
        pending = {messages[i].seq: messages[i] for i in taken}
        outcome = {m.seq: InsertOutcome.INSERTED for m in messages if m.seq not in pending}
        self._settle(conversation_id, pending, outcome)
        return InsertResult.of(messages, outcome)

    def _settle(
        self, conversation_id: str, pending: dict[int, Message], outcome: dict[int, InsertOutcome]
    ) -> None:
        """Classify occupied rows; fill rows holding only tags (rare: one call each)."""
        for _ in range(MAX_ROUNDS):
            if not pending:
                return
            for seq, slot in self._read(conversation_id, pending).items():
                kind = classify(slot, pending[seq])
                if kind is not None:
                    outcome[seq] = kind
                    del pending[seq]
            for seq, message in list(pending.items()):
                if self._upsert(commands.fill_row(conversation_id, message), "store a message"):
                    outcome[seq] = InsertOutcome.INSERTED
                    del pending[seq]
        raise StoreUnavailable(f"insert into {conversation_id} did not settle under contention")

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """One find with ``_id: {$in}``; rows holding nothing are left out.

        For a viewer an aggregate with ``$in`` on ``del_list``: no deleter list travels.
        """
        found = self._read(conversation_id, seqs, viewer)
        return {seq: slot for seq, slot in found.items() if not slot.is_empty}

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """One conditional upsert; a collision on _id means revoked or purged already."""
        for _ in range(MAX_ROUNDS):
            if self._upsert(commands.revoke_row(conversation_id, seq, revoke), "revoke"):
                return True
            slot = self._read(conversation_id, [seq]).get(seq, EMPTY_SLOT)
            if slot.revoke is not None or slot.purged:
                return False
        raise StoreUnavailable(f"revoke of {conversation_id}/{seq} did not settle")

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

    def close(self) -> None:
        """Close the client."""
        self._connection.close()

    def delete_for(self, conversation_id: str, seqs: Sequence[int], user_id: str) -> int:
        """Set-add user_id; the rows are read as user_id sees them (never every deleter)."""
        return self._patch(conversation_id, seqs, deleting_for(user_id), user_id)

    def _read(
        self, conversation_id: str, seqs: Collection[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        if not seqs:
            return {}
        with translated("read messages"):
            if viewer is not None:
                pipeline = commands.viewed_rows(conversation_id, seqs, viewer)
                return row_slots(self._rows.aggregate(pipeline))
            return row_slots(self._rows.find(commands.rows_in(conversation_id, seqs)))

    def _upsert(self, command: commands.Update, action: str) -> bool:
        """Run a conditional upsert; False when the row exists but fails the condition."""
        with translated(action):
            try:
                self._rows.update_one(command.filter, command.update, upsert=command.upsert)
            except DuplicateKeyError:
                contention.record(contention.ROW_UPSERT_LOST)
                return False
        return True

    def _patch(
        self, conversation_id: str, seqs: Sequence[int], decide: Decision, viewer: str | None = None
    ) -> int:
        """Read the rows once, then upsert every change in one unordered bulk write.

        With a viewer the rows are read as that viewer sees them.
        """
        found = self._read(conversation_id, seqs, viewer)
        changes: dict[int, SlotPatch] = {}
        for seq in seqs:
            patch = decide(found.get(seq, EMPTY_SLOT))
            if patch is not None:
                changes[seq] = patch
        pending = [commands.patch_row(conversation_id, seq, p) for seq, p in changes.items()]
        for _ in range(MAX_ROUNDS):
            if not pending:
                return len(changes)
            # Two first upserts of one _id may collide; the retry finds the row.
            pending = [pending[i] for i in self._bulk_upsert(pending, "write tags")]
            contention.record(contention.ROW_UPSERT_LOST, len(pending))
        raise StoreUnavailable(f"tag write to {conversation_id} did not settle under contention")

    def _bulk_upsert(self, updates: Sequence[commands.Update], action: str) -> list[int]:
        """One unordered bulk_write; the positions of the updates that collided on _id."""
        operations = [UpdateOne(c.filter, c.update, upsert=c.upsert) for c in updates]
        with translated(action):
            try:
                self._rows.bulk_write(operations, ordered=False)
            except BulkWriteError as error:
                return duplicate_positions(error.details)
        return []
