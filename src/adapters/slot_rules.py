"""Tag writes shared by every MessageStore layout; the per-slot rules live in domain.tags."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from domain.tags import (
    OUTCOMES,
    Decision,
    classify,
    deleting_for,
    insert_result,
    marking_read,
    purging,
)

__all__ = [
    "MAX_ROUNDS",
    "OUTCOMES",
    "Decision",
    "TagWrites",
    "classify",
    "insert_result",
    "purging",
]

# Each retry means another writer changed a slot between two of our round trips; a slot
# can change only a few times, so this bound is never reached honestly.
MAX_ROUNDS = 1000


class TagWrites(ABC):
    """delete_for, mark_read and purge of a MessageStore, decided here and written by _patch."""

    @abstractmethod
    def _patch(self, conversation_id: str, seqs: Sequence[int], decide: Decision) -> int:
        """Read the slots of seqs once, write what decide returns; how many seqs changed."""

    def delete_for(self, conversation_id: str, seqs: Sequence[int], user_id: str) -> int:
        """Set-add user_id to deleted_by; see MessageStore.delete_for."""
        return self._patch(conversation_id, seqs, deleting_for(user_id))

    def mark_read(self, conversation_id: str, seqs: Sequence[int], reader_id: str) -> int:
        """Mark read for reader_id; see MessageStore.mark_read."""
        return self._patch(conversation_id, seqs, marking_read(reader_id))

    def purge(self, conversation_id: str, seqs: Sequence[int]) -> int:
        """Physically delete; see MessageStore.purge."""
        return self._patch(conversation_id, seqs, purging)
