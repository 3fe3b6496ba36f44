"""A pure reference model of one conversation, built from the domain alone.

It applies the same use cases as MessageService to a dict of slots and a few watermarks,
using only domain rules (policy, Slot.patched, project), so that any backend can be compared
with it view by view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from domain import policy
from domain.errors import InvalidMessage, SeqNotAllocated, WriteConflict
from domain.model import (
    EMPTY_SLOT,
    Actor,
    Draft,
    InsertResult,
    Message,
    Revoke,
    Role,
    Slot,
    SlotPatch,
    Watermarks,
)
from domain.projection import Entry, project


@dataclass
class ReferenceConversation:
    """Expected state of one conversation."""

    conversation_id: str
    slots: dict[int, Slot] = field(default_factory=dict)
    max_seq: int = 0
    min_seq: int = 0
    user_min: dict[str, int] = field(default_factory=dict)
    sends: dict[str, int] = field(default_factory=dict)  # client_msg_id -> seq

    def check_send(self, drafts: Sequence[Draft]) -> None:
        """Refuse a send as MessageService.send does, before anything is written."""
        ids = [draft.client_msg_id for draft in drafts]
        if len(set(ids)) != len(ids):
            raise InvalidMessage("a batch must not hold the same client_msg_id twice")
        for draft in drafts:
            if draft.client_msg_id in self.sends:
                stored = self.slots[self.sends[draft.client_msg_id]]
                if stored.message is None or stored.message.send_id != draft.send_id:
                    raise WriteConflict(f"{draft.client_msg_id} was purged or is another's")

    def sent(self, drafts: Sequence[Draft], messages: Sequence[Message]) -> None:
        """Check what MessageService.send returned for drafts, and record it.

        A client_msg_id sent before gets its stored message back; new ones get the next
        seqs in the drafts' order.
        """
        fresh: list[Message] = []
        for draft, message in zip(drafts, messages, strict=True):
            if draft.client_msg_id in self.sends:
                assert message == self.slots[self.sends[draft.client_msg_id]].message
                continue
            assert message.seq == self.max_seq + 1 + len(fresh)
            assert (message.send_id, message.client_msg_id, message.content) == (
                draft.send_id,
                draft.client_msg_id,
                draft.content,
            )
            fresh.append(message)
        self.ingest(fresh)
        self.sends.update((m.client_msg_id, m.seq) for m in fresh)

    def ingest(self, messages: Sequence[Message]) -> InsertResult:
        kinds: dict[str, list[int]] = {
            "inserted": [],
            "duplicates": [],
            "conflicts": [],
            "purged": [],
        }
        for message in messages:
            slot = self.slots.get(message.seq, EMPTY_SLOT)
            if slot.purged:
                kinds["purged"].append(message.seq)
            elif slot.message is None:
                self.slots[message.seq] = replace(slot, message=message)
                kinds["inserted"].append(message.seq)
            elif slot.message == message:
                kinds["duplicates"].append(message.seq)
            else:
                kinds["conflicts"].append(message.seq)
        if messages:
            self.max_seq = max(self.max_seq, *(m.seq for m in messages))
        return InsertResult(**{kind: tuple(seqs) for kind, seqs in kinds.items()})

    def revoke(self, seq: int, actor: Actor, sender_role: Role) -> bool:
        self._allocated([seq])
        slot = self.slots.get(seq, EMPTY_SLOT)
        if slot.purged or slot.revoke is not None:
            return False
        policy.check_revoke(actor, slot.message, sender_role)
        self.slots[seq] = replace(slot, revoke=Revoke(actor.user_id, actor.role))
        return True

    def delete_for(self, seqs: Sequence[int], user_id: str) -> None:
        self._allocated(seqs)
        self._patch(seqs, SlotPatch(add_deleted_by=user_id))

    def mark_read(self, seqs: Sequence[int], reader_id: str) -> None:
        self._allocated(seqs)
        for seq in seqs:
            slot = self.slots.get(seq, EMPTY_SLOT)
            if slot.message is None:
                self._patch([seq], SlotPatch(add_read_by=reader_id))
            elif policy.may_mark_read(reader_id, slot.message):
                self._patch([seq], SlotPatch(set_read=True))

    def purge(self, seqs: Sequence[int], actor: Actor) -> None:
        policy.check_moderator(actor, "physical delete")
        self._allocated(seqs)
        self._patch(seqs, SlotPatch(purge=True))

    def clear_history(self, user_id: str) -> None:
        self.user_min[user_id] = max(self.user_min.get(user_id, 0), self.max_seq + 1)

    def clear_for_everyone(self, actor: Actor) -> None:
        policy.check_moderator(actor, "clear for everyone")
        self.min_seq = max(self.min_seq, self.max_seq + 1)

    def view(self, viewer_id: str, seqs: Sequence[int]) -> list[Entry]:
        marks = Watermarks(self.max_seq, self.min_seq, self.user_min.get(viewer_id, 0))
        return project(viewer_id, seqs, self.slots, marks)

    def _patch(self, seqs: Sequence[int], patch: SlotPatch) -> None:
        for seq in seqs:
            patched = self.slots.get(seq, EMPTY_SLOT).patched(patch)
            if not patched.is_empty:
                self.slots[seq] = patched

    def _allocated(self, seqs: Sequence[int]) -> None:
        if any(seq > self.max_seq for seq in seqs):
            raise SeqNotAllocated(f"beyond max_seq {self.max_seq}")
