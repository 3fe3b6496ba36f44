"""What each write does to one slot: the rules every MessageStore layout applies.

A store reads the slots first, asks these rules what to write, then writes it in its own
way (a bucket patch, a row upsert), so bucket and row stores on every engine decide alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from domain.budget import EARLY_READERS_KEPT
from domain.model import InsertResult, Message, Slot, SlotPatch
from domain.policy import may_mark_read

Decision = Callable[[Slot], SlotPatch | None]

OUTCOMES = ("inserted", "duplicates", "conflicts", "purged")


def classify(slot: Slot, message: Message) -> str | None:
    """Why message cannot go into slot ("purged", "duplicates", "conflicts"), or None if free."""
    if slot.purged:
        return "purged"
    if slot.message is None:
        return None
    return "duplicates" if slot.message == message else "conflicts"


def insert_result(messages: Sequence[Message], outcome: Mapping[int, str]) -> InsertResult:
    """InsertResult from each seq's outcome (one of OUTCOMES), seqs in input order."""
    return InsertResult(
        *(tuple(m.seq for m in messages if outcome[m.seq] == kind) for kind in OUTCOMES)
    )


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
