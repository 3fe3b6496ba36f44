"""BucketMessageStore: the MessageStore of every bucket engine, written once.

It holds OpenIM's insert state machine (research/openim-storage.md §3.2), improved so that
one bucket's batch is written by one conditional update, and so that tags written to a
bucket that does not exist yet create it instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.slot_rules import (
    MAX_ROUNDS,
    Decision,
    TagWrites,
    classify,
    insert_result,
)
from domain.errors import StoreUnavailable
from domain.layout import BucketLayout
from domain.model import (
    EMPTY_SLOT,
    InsertResult,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
)
from ports.bucket_repository import BucketRepository


class BucketMessageStore(TagWrites):
    """MessageStore over any BucketRepository (memory, SQL JSON, MongoDB)."""

    def __init__(self, repository: BucketRepository) -> None:
        self.repository = repository
        self.layout: BucketLayout = repository.layout

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store messages; see MessageStore.insert."""
        outcome: dict[int, str] = {}
        by_seq = {message.seq: message for message in messages}
        for doc_id, seqs in self.layout.group(conversation_id, by_seq).items():
            pending = {self.layout.slot_index(seq): by_seq[seq] for seq in seqs}
            self._insert_bucket(doc_id, pending, outcome)
        return insert_result(messages, outcome)

    def _insert_bucket(
        self, doc_id: str, pending: dict[int, Message], outcome: dict[int, str]
    ) -> None:
        for _ in range(MAX_ROUNDS):
            if self.repository.write_messages(doc_id, pending):
                outcome.update((m.seq, "inserted") for m in pending.values())
                return
            current = self.repository.read({doc_id: sorted(pending)}).get(doc_id)
            if current is None:
                fresh = {index: Slot(message=m) for index, m in pending.items()}
                if self.repository.create_bucket(doc_id, fresh):
                    outcome.update((m.seq, "inserted") for m in pending.values())
                    return
                continue  # another writer created the bucket: step back, retry as an update
            for index, slot in current.items():
                kind = classify(slot, pending[index])
                if kind is not None:
                    outcome[pending.pop(index).seq] = kind
            if not pending:
                return
        raise StoreUnavailable(f"insert into {doc_id} did not settle under contention")

    def get(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """Read slots holding anything; see MessageStore.get."""
        found = self._read(conversation_id, seqs)
        return {seq: slot for seq, slot in found.items() if slot is not None and not slot.is_empty}

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record a revoke; see MessageStore.revoke."""
        doc_id, index = self.layout.doc_id(conversation_id, seq), self.layout.slot_index(seq)
        for _ in range(MAX_ROUNDS):
            if self.repository.set_revoke(doc_id, index, revoke):
                return True
            if doc_id in self.repository.read({doc_id: [index]}):
                return False  # already revoked, or purged
            if self.repository.create_bucket(doc_id, {index: Slot(revoke=revoke)}):
                return True
        raise StoreUnavailable(f"revoke in {doc_id} did not settle under contention")

    def stats(self) -> StoreStats:
        """Footprint of the buckets."""
        return self.repository.stats()

    def close(self) -> None:
        """Release the repository."""
        self.repository.close()

    def _read(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot | None]:
        """Slots of seqs in one round trip; None where the bucket does not exist."""
        groups = self.layout.group(conversation_id, seqs)
        wanted = {
            doc_id: [self.layout.slot_index(s) for s in group] for doc_id, group in groups.items()
        }
        buckets = self.repository.read(wanted) if wanted else {}
        found: dict[int, Slot | None] = {}
        for doc_id, group in groups.items():
            bucket = buckets.get(doc_id)
            for seq in group:
                found[seq] = None if bucket is None else bucket[self.layout.slot_index(seq)]
        return found

    def _patch(
        self,
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
    ) -> int:
        """Read the slots once, then write each bucket's changes in one patch (or create it)."""
        changes: dict[str, dict[int, SlotPatch]] = {}
        for seq, slot in self._read(conversation_id, seqs).items():
            patch = decide(EMPTY_SLOT if slot is None else slot)
            if patch is not None:
                doc_id = self.layout.doc_id(conversation_id, seq)
                changes.setdefault(doc_id, {})[self.layout.slot_index(seq)] = patch
        for doc_id, patches in changes.items():
            self._patch_bucket(doc_id, patches)
        return sum(len(patches) for patches in changes.values())

    def _patch_bucket(self, doc_id: str, patches: Mapping[int, SlotPatch]) -> None:
        for _ in range(MAX_ROUNDS):
            if self.repository.patch(doc_id, patches):
                return
            fresh = {index: EMPTY_SLOT.patched(patch) for index, patch in patches.items()}
            if self.repository.create_bucket(doc_id, fresh):
                return
        raise StoreUnavailable(f"tag write to {doc_id} did not settle under contention")
