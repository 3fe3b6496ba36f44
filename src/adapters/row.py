"""RowMessageStore: the MessageStore of every row backend, written once.

The twin of ``BucketMessageStore``: it holds the row insert state machine (insert the new
rows, classify the seqs that collided, fill the rows holding only tags) and applies the tag
rules of ``domain.tags``; a ``RowRepository`` (sql-row, mongo-row) only stores and reads rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from imbucket.adapters import contention
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Slot,
    StoreStats,
)
from imbucket.domain.scan import SlotPage
from imbucket.domain.tags import MAX_ROUNDS, Decision, Guard, TagWrites, classify, deleting_for
from imbucket.ports.row_repository import RowRepository


class RowMessageStore(TagWrites):
    """MessageStore over any RowRepository (SQL, MongoDB)."""

    def __init__(self, repository: RowRepository) -> None:
        self.repository = repository
        self.layout: BucketLayout = repository.layout

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store messages; see MessageStore.insert.

        One ``insert_new`` for the batch; the seqs that collided are read once and
        classified, and rows holding only tags are filled one by one (rare).
        """
        ordered = sorted(messages, key=lambda m: m.seq)
        collided = self.repository.insert_new(conversation_id, ordered)
        return self._result(conversation_id, messages, collided)

    def insert_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, InsertResult]:
        """Store several conversations' messages; see MessageStore.insert_many.

        One ``insert_new_many`` for them all; collisions are settled per conversation.
        """
        ordered = {conv: sorted(ms, key=lambda m: m.seq) for conv, ms in batches.items() if ms}
        collided = self.repository.insert_new_many(ordered) if ordered else {}
        return {
            conv: self._result(conv, messages, collided.get(conv, set()))
            for conv, messages in batches.items()
        }

    def _result(
        self, conversation_id: str, messages: Sequence[Message], collided: set[int]
    ) -> InsertResult:
        """The outcome of an insert whose new rows are in: collided seqs are settled."""
        pending = {m.seq: m for m in sorted(messages, key=lambda m: m.seq) if m.seq in collided}
        outcome = {m.seq: InsertOutcome.INSERTED for m in messages if m.seq not in collided}
        self._settle(conversation_id, pending, outcome)
        return InsertResult.of(messages, outcome)

    def _settle(
        self, conversation_id: str, pending: dict[int, Message], outcome: dict[int, InsertOutcome]
    ) -> None:
        """Classify pending seqs by their row; fill rows holding only tags with the message."""
        for _ in range(MAX_ROUNDS):
            if not pending:
                return
            found = self.repository.read_state(conversation_id, list(pending))
            for seq, message in list(pending.items()):
                kind = classify(found.get(seq, EMPTY_SLOT), message)
                if kind is None:  # free: its message goes in unless another writer wins
                    if not self.repository.fill(conversation_id, message):
                        contention.record(contention.ROW_UPSERT_LOST)
                        continue
                    kind = InsertOutcome.INSERTED
                outcome[seq] = kind
                del pending[seq]
        if pending:
            raise StoreUnavailable(f"insert into {conversation_id} did not settle under contention")

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Read slots holding anything (scoped to viewer when given); see MessageStore.get."""
        found = self.repository.read(conversation_id, seqs, viewer)
        return {seq: slot for seq, slot in found.items() if not slot.is_empty}

    def get_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Read several conversations in one repository read; see MessageStore.get_many."""
        found = self.repository.read_many({c: seqs for c, seqs in wanted.items() if seqs})
        return {
            conv: {seq: slot for seq, slot in found.get(conv, {}).items() if not slot.is_empty}
            for conv in wanted
        }

    def batch(self) -> AbstractContextManager[None]:
        """Writes as usual (an engine with transactions overrides it); see MessageStore.batch."""
        return nullcontext()

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record a revoke; see MessageStore.revoke."""
        for _ in range(MAX_ROUNDS):
            if self.repository.set_revoke(conversation_id, seq, revoke):
                return True
            slot = self.repository.read_state(conversation_id, [seq]).get(seq, EMPTY_SLOT)
            if slot.revoke is not None or slot.purged:
                return False
            # Another writer created the row in between: it is still free, so try again.
        raise StoreUnavailable(f"revoke of {conversation_id}/{seq} did not settle")

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        """Set-add user_id to deleted_by; see MessageStore.delete_for.

        Reads the rows as user_id sees them: the rule needs only whether user_id deleted
        them, so a message deleted by thousands costs each deleter two round trips, not a
        read of all the others.
        """
        return self._apply(conversation_id, seqs, deleting_for(user_id), guard, user_id)

    def _patch(
        self, conversation_id: str, seqs: Sequence[int], decide: Decision, guard: Guard | None
    ) -> int:
        """Read the rows once, then write every change in one patch."""
        return self._apply(conversation_id, seqs, decide, guard)

    def _apply(
        self,
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
        viewer: str | None = None,
    ) -> int:
        found = self.repository.read(conversation_id, seqs, viewer)
        return self._apply_read(found, conversation_id, seqs, decide, guard)

    def _apply_read(
        self,
        found: dict[int, Slot],
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
    ) -> int:
        """``_apply`` after its read (found: the rows of seqs, read by the caller)."""
        if guard is not None:
            guard([seq for seq in seqs if seq not in found or found[seq].is_empty])
        changes = {seq: decide(found.get(seq, EMPTY_SLOT)) for seq in seqs}
        patches = {seq: patch for seq, patch in changes.items() if patch is not None}
        return self.repository.patch(conversation_id, patches)

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """Rows in the repository's key order; see MessageStore.scan."""
        return self.repository.scan(after, limit)

    def stats(self) -> StoreStats:
        """The repository's footprint; see MessageStore.stats."""
        return self.repository.stats()

    def close(self) -> None:
        """Release the repository's connections."""
        self.repository.close()
