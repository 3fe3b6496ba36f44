"""What each write does to one slot: the rules every MessageStore layout applies.

A store reads the slots first, asks these rules what to write, then writes it in its own
way (a bucket patch, a row upsert), so bucket and row stores on every engine decide alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

from imbucket.domain.budget import EARLY_READERS_KEPT
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import InsertOutcome, Message, Slot, SlotPatch
from imbucket.domain.policy import may_mark_read

Decision = Callable[[Slot], SlotPatch | None]
# What a tag write calls after its read and before any write, with the seqs the read found
# empty: the caller's allocation check (a slot holding anything was written at an allocated
# seq, so only empty ones need it). Raising from it writes nothing.
Guard = Callable[[list[int]], None]


def checked_beyond(guard: Guard | None, max_seq: int) -> Guard | None:
    """guard, called only when a seq found empty is beyond max_seq (read with the slots).

    Seqs up to a max_seq read in the tag write's own read are allocated (max_seq only moves
    up): the allocation check would pass without its own round trip.
    """
    if guard is None:
        return None
    checked = guard

    def beyond(empty: list[int]) -> None:
        if any(seq > max_seq for seq in empty):
            checked(empty)

    return beyond


# Each retry means another writer changed a slot between two of a store's round trips; a
# slot can change only a few times, so this bound is never reached honestly.
MAX_ROUNDS = 1000


def patch_sparing_purged(
    doc_id: str,
    patches: Mapping[int, SlotPatch],
    update: Callable[[Mapping[int, SlotPatch]], bool],
    read: Callable[[list[int]], Mapping[int, Slot] | None],
    exists: Callable[[], bool],
) -> bool:
    """A bucket's conditional tag patch that spares purged slots: whether it was written.

    update tries the patch (False when its condition did not match); when it does not match,
    read (the bucket's target slots, None when the bucket is missing) tells a missing bucket
    or a refused budget (False) from purged target slots, which are dropped before the patch
    is tried again. exists answers for a patch left with no slot at all.
    """
    for _ in range(MAX_ROUNDS):
        if not patches:
            return exists()
        if update(patches):
            return True
        slots = read(sorted(patches))
        if slots is None:
            return False
        kept = {i: p for i, p in patches.items() if p.purge or not slots[i].purged}
        if len(kept) == len(patches):
            return False  # over the budget
        patches = kept
    raise StoreUnavailable(f"tag write to {doc_id} did not settle under contention")


def classify(slot: Slot, message: Message) -> InsertOutcome | None:
    """Why message cannot go into slot (purged, duplicate, conflict), or None if it is free."""
    if slot.purged:
        return InsertOutcome.PURGED
    if slot.message is None:
        return None
    return InsertOutcome.DUPLICATE if slot.message == message else InsertOutcome.CONFLICT


def takes_revoke(slot: Slot) -> bool:
    """Whether a revoke may be written here: once per slot, and never on a purged one."""
    return slot.revoke is None and not slot.purged


def deleting_for(user_id: str) -> Decision:
    """Delete-for-me: a set-add of user_id, skipped on purged slots and repeats."""

    def decide(slot: Slot) -> SlotPatch | None:
        if slot.purged or user_id in slot.deleted_by:
            return None
        return SlotPatch(add_deleted_by=user_id)

    return decide


def marking_read(reader_id: str) -> Decision:
    """Mark-read: never the reader's own message; remembered in read_by until it lands.

    read_by stops at EARLY_READERS_KEPT readers: by then the slot counts as read whoever
    the sender turns out to be, so more readers would change nothing but its size.
    """

    def decide(slot: Slot) -> SlotPatch | None:
        if slot.purged:
            return None
        if slot.message is None:
            if reader_id in slot.read_by or len(slot.read_by) >= EARLY_READERS_KEPT:
                return None
            return SlotPatch(add_read_by=reader_id)
        if slot.is_read or not may_mark_read(reader_id, slot.message):
            return None
        return SlotPatch(set_read=True)

    return decide


def purging(slot: Slot) -> SlotPatch | None:
    """Physical delete: once per slot."""
    return None if slot.purged else SlotPatch(purge=True)


class TagWrites(ABC):
    """delete_for, mark_read and purge of a MessageStore, through the store's one _patch.

    Each operation applies its rule above, so every layout decides alike.
    """

    @abstractmethod
    def _patch(
        self, conversation_id: str, seqs: Sequence[int], decide: Decision, guard: Guard | None
    ) -> int:
        """Read the slots of seqs once and write what decide returns; how many changed.

        guard, if any, is called with the seqs found empty, after the read, before writing.
        """

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        """Set-add user_id to deleted_by; see MessageStore.delete_for."""
        return self._patch(conversation_id, seqs, deleting_for(user_id), guard)

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        """Mark read for reader_id; see MessageStore.mark_read."""
        return self._patch(conversation_id, seqs, marking_read(reader_id), guard)

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        """Physically delete; see MessageStore.purge."""
        return self._patch(conversation_id, seqs, purging, guard)
