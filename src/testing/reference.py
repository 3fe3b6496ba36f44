"""A pure reference model of one conversation, built from the domain alone.

It applies the same use cases as MessageService to a dict of slots and a few watermarks,
using only domain rules (policy, sending, tags, Watermarks, project) and none of the
service's or the stores' orchestration, so that any backend can be compared with it view
by view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from imbucket.domain import policy, sending
from imbucket.domain.errors import SeqNotAllocated
from imbucket.domain.model import (
    EMPTY_SLOT,
    Actor,
    Draft,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Role,
    Slot,
    Watermarks,
)
from imbucket.domain.projection import Entry, project
from imbucket.domain.tags import (
    Decision,
    classify,
    deleting_for,
    marking_read,
    purging,
    takes_revoke,
)


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
        sending.check_unique(drafts)
        sending.answers(drafts, self.sends, self.slots)

    def sent(self, drafts: Sequence[Draft], messages: Sequence[Message]) -> None:
        """Check what MessageService.send returned for drafts, and record it.

        A client_msg_id sent before gets its stored message back; new ones get the next
        seqs in the drafts' order, stamped from their draft.
        """
        fresh: list[Message] = []
        for draft, message in zip(drafts, messages, strict=True):
            if draft.client_msg_id in self.sends:
                assert message == self.slots[self.sends[draft.client_msg_id]].message
                continue
            seq = self.max_seq + 1 + len(fresh)
            assert message == sending.stamp(
                self.conversation_id, draft, seq, message.server_msg_id, message.send_time
            )
            fresh.append(message)
        self.ingest(fresh)
        self.sends.update((m.client_msg_id, m.seq) for m in fresh)

    def ingest(self, messages: Sequence[Message]) -> InsertResult:
        """What MessageService.ingest stores and reports."""
        outcome: dict[int, InsertOutcome] = {}
        for message in messages:
            slot = self.slots.get(message.seq, EMPTY_SLOT)
            kind = classify(slot, message)
            if kind is None:
                self.slots[message.seq] = replace(slot, message=message)
                kind = InsertOutcome.INSERTED
            outcome[message.seq] = kind
        if messages:
            self.max_seq = max(self.max_seq, *(m.seq for m in messages))
        return InsertResult.of(messages, outcome)

    def revoke(self, seq: int, actor: Actor, sender_role: Role) -> bool:
        """What MessageService.revoke does; False when there is nothing to revoke."""
        self._allocated([seq])
        slot = self.slots.get(seq, EMPTY_SLOT)
        if not takes_revoke(slot):
            return False
        policy.check_revoke(actor, slot.message, sender_role)
        self.slots[seq] = replace(slot, revoke=Revoke(actor.user_id, actor.role))
        return True

    def delete_for(self, seqs: Sequence[int], user_id: str) -> None:
        """MessageService.delete_for_me: user_id joins each slot's deleters."""
        self._allocated(seqs)
        self._apply(seqs, deleting_for(user_id))

    def mark_read(self, seqs: Sequence[int], reader_id: str) -> None:
        """MessageService.mark_read: reader_id joins each slot's readers."""
        self._allocated(seqs)
        self._apply(seqs, marking_read(reader_id))

    def purge(self, seqs: Sequence[int], actor: Actor) -> None:
        """MessageService.purge: the slots become purged, for good."""
        policy.check_moderator(actor, "physical delete")
        self._allocated(seqs)
        self._apply(seqs, purging)

    def clear_history(self, user_id: str) -> None:
        """MessageService.clear_history: user_id's floor moves up to max_seq."""
        floor = Watermarks.clearing(self.max_seq)
        self.user_min[user_id] = max(self.user_min.get(user_id, 0), floor)

    def clear_for_everyone(self, actor: Actor) -> None:
        """MessageService.clear_for_everyone: the conversation's floor moves up."""
        policy.check_moderator(actor, "clear for everyone")
        self.min_seq = max(self.min_seq, Watermarks.clearing(self.max_seq))

    def view(self, viewer_id: str, seqs: Sequence[int]) -> list[Entry]:
        """What pull(seqs) shows viewer_id."""
        return project(viewer_id, seqs, self.slots, self._marks(viewer_id))

    def latest(self, viewer_id: str, count: int) -> list[Entry]:
        """What pull_latest(count) shows viewer_id."""
        return self.view(viewer_id, self._marks(viewer_id).latest(count))

    def _marks(self, viewer_id: str) -> Watermarks:
        return Watermarks(self.max_seq, self.min_seq, self.user_min.get(viewer_id, 0))

    def _apply(self, seqs: Sequence[int], decide: Decision) -> None:
        for seq in seqs:
            patch = decide(self.slots.get(seq, EMPTY_SLOT))
            if patch is not None:
                self.slots[seq] = self.slots.get(seq, EMPTY_SLOT).patched(patch)

    def _allocated(self, seqs: Sequence[int]) -> None:
        if any(seq > self.max_seq for seq in seqs):
            raise SeqNotAllocated(f"beyond max_seq {self.max_seq}")
