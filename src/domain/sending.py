"""The rules of an idempotent send, once per (conversation_id, client_msg_id) (docs/sending.md).

``MessageService.send`` reads and writes through the ports; what to make of what it read is
decided here: the message a draft becomes, whether a claimed seq already answers a draft,
and which drafts an insert settled.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from operator import attrgetter

from imbucket.domain.errors import InvalidMessage, WriteConflict
from imbucket.domain.model import (
    DRAFT_FIELDS,
    MESSAGE_FIELDS,
    Draft,
    InsertResult,
    Message,
    Slot,
    stored_message,
)

# A send builds each message twice (stamped, then numbered): by position, in one call each.
_draft_values = attrgetter(*DRAFT_FIELDS)
_after_seq = attrgetter(*MESSAGE_FIELDS[1:])


def check_unique(drafts: Sequence[Draft]) -> None:
    """InvalidMessage when a batch holds one client_msg_id twice.

    Two drafts of one batch cannot be a retry of each other.
    """
    if len(drafts) < 2:
        return
    ids = [draft.client_msg_id for draft in drafts]
    if len(set(ids)) != len(ids):
        raise InvalidMessage("a batch must not hold the same client_msg_id twice")


def stamp(conversation_id: str, draft: Draft, seq: int, server_msg_id: str, now: int) -> Message:
    """The message draft becomes at seq: the draft's fields, a server id and the server time."""
    given = dict(zip(DRAFT_FIELDS, _draft_values(draft), strict=True))
    given["options"] = dict(given["options"])
    return Message(
        conversation_id=conversation_id,
        seq=seq,
        server_msg_id=server_msg_id,
        send_time=now,
        create_time=now,
        **given,
    )


def numbered(messages: Sequence[Message], first: int) -> list[Message]:
    """The messages at consecutive seqs from first, in their order (a fresh send's seqs)."""
    # What dataclasses.replace does, faster: the messages were checked when they were stamped.
    return [
        stored_message(message.conversation_id, seq, _after_seq(message))
        for seq, message in enumerate(messages, first)
    ]


def answer(draft: Draft, seq: int, slot: Slot | None) -> Message | None:
    """The stored message answering draft, whose client_msg_id claimed seq.

    None when seq holds no message yet (its sender has not stored it, or is storing it
    now). The other fields of the draft are not compared. Raises WriteConflict when seq
    was purged (physical delete is final) or holds another sender's message, or one with
    another client_msg_id.
    """
    if slot is None or (slot.message is None and not slot.purged):
        return None
    if slot.message is None:
        raise WriteConflict(
            f"client_msg_id {draft.client_msg_id!r} was sent as seq {seq}, since purged"
        )
    stored = slot.message
    if (stored.client_msg_id, stored.send_id) != (draft.client_msg_id, draft.send_id):
        raise WriteConflict(
            f"seq {seq} of client_msg_id {draft.client_msg_id!r} holds another message"
        )
    return stored


def answers(
    drafts: Sequence[Draft], claimed: Mapping[str, int], slots: Mapping[int, Slot]
) -> dict[str, Message]:
    """By client_msg_id, the stored messages answering the drafts that have a claimed seq.

    slots holds the slots of those seqs (an absent one is empty); see answer.
    """
    found: dict[str, Message] = {}
    for draft in drafts:
        seq = claimed.get(draft.client_msg_id)
        message = None if seq is None else answer(draft, seq, slots.get(seq))
        if message is not None:
            found[draft.client_msg_id] = message
    return found


def stored(pending: Sequence[Message], result: InsertResult) -> list[Message]:
    """The messages of pending that the insert stored.

    A duplicate is this very message (its server_msg_id is new): a write that was applied,
    then tried again after its connection was lost.
    """
    seqs = {*result.inserted, *result.duplicates}
    return [message for message in pending if message.seq in seqs]


def check_settled(drafts: Sequence[Draft], sent: Collection[str]) -> None:
    """WriteConflict when a draft's client_msg_id has no stored message after the insert."""
    unsettled = [draft.client_msg_id for draft in drafts if draft.client_msg_id not in sent]
    if unsettled:
        raise WriteConflict(f"could not store client_msg_ids {unsettled[:5]}")
