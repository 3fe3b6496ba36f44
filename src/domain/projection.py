"""Read-time projection: one stored slot, one view per viewer."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from imbucket.domain.model import ContentType, Message, Revoke, SessionType, Slot, Watermarks
from imbucket.domain.quick_constructors import quick_constructor


class TombstoneReason(StrEnum):
    """Why a seq shows no message to a viewer."""

    UNALLOCATED = "unallocated"
    CLEARED = "cleared"
    PURGED = "purged"
    MISSING = "missing"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Tombstone:
    """An explicit gap: the seq, and why there is nothing to show. Reveals nothing else."""

    seq: int
    reason: TombstoneReason


@dataclass(frozen=True, slots=True)
class MessageView:
    """What one viewer sees of a stored message.

    ``revoked`` is set when the message was revoked; then ``message`` carries content type
    2101 and the revoke notice instead of the original content, which is not exposed.
    ``is_read`` is exposed for single chats only (None elsewhere).
    """

    seq: int
    message: Message
    revoked: Revoke | None = None
    is_read: bool | None = None

    @property
    def content(self) -> str:
        """The content this viewer may see."""
        return self.message.content

    @property
    def content_type(self) -> int:
        """The content type this viewer sees (2101 once revoked)."""
        return self.message.content_type


Entry = MessageView | Tombstone


def project(
    viewer_id: str,
    seqs: Sequence[int],
    slots: Mapping[int, Slot],
    watermarks: Watermarks,
) -> list[Entry]:
    """Return exactly one entry per requested seq, in the order requested."""
    # Seqs past a viewer's own ceiling (a member who left) are, to them, not allocated.
    top, floor, get = watermarks.ceiling, watermarks.floor, slots.get
    return [_project_one(viewer_id, seq, get(seq), top, floor) for seq in seqs]


def _project_one(viewer_id: str, seq: int, slot: Slot | None, top: int, floor: int) -> Entry:
    """One seq's entry; top and floor are the viewer's watermarks (ceiling and floor)."""
    if seq > top:
        return _tombstone(seq, TombstoneReason.UNALLOCATED)
    if seq < floor:
        return _tombstone(seq, TombstoneReason.CLEARED)
    if slot is None:
        return _tombstone(seq, TombstoneReason.MISSING)
    if slot.purged:
        return _tombstone(seq, TombstoneReason.PURGED)
    message = slot.message
    if message is None:
        return _tombstone(seq, TombstoneReason.MISSING)
    if viewer_id in slot.deleted_by:
        return _tombstone(seq, TombstoneReason.DELETED)
    is_read = slot.read if message.session_type == _SINGLE else None
    if slot.revoke is not None:
        notice = replace(
            message,
            content_type=ContentType.REVOKE_NOTIFICATION,
            content=revoke_notice(message, slot.revoke),
        )
        return _view(seq, notice, slot.revoke, is_read)
    return _view(seq, message, None, is_read)


# Built once per pulled seq: the quick constructors (domain.quick_constructors) of the two entries.
_view: Callable[..., MessageView] = quick_constructor(MessageView)
_tombstone: Callable[..., Tombstone] = quick_constructor(Tombstone)
_SINGLE = int(SessionType.SINGLE)


def revoke_notice(message: Message, revoke: Revoke) -> str:
    """The revoke notice shown instead of a revoked message's content (OpenIM's field names)."""
    return json.dumps(
        {
            "revokerID": revoke.user_id,
            "revokerRole": int(revoke.role),
            "revokerNickname": revoke.nickname,
            "revokeTime": revoke.time,
            "clientMsgID": message.client_msg_id,
            "sourceMessageSendID": message.send_id,
            "sourceMessageSendTime": message.send_time,
            "sourceMessageSenderNickname": message.sender_nickname,
            "sessionType": int(message.session_type),
            "seq": message.seq,
        },
        separators=(",", ":"),
        sort_keys=True,
    )
