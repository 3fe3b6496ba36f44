"""Who may do what. Each check raises NotPermitted before anything is written."""

from __future__ import annotations

from imbucket.domain.errors import NotPermitted
from imbucket.domain.model import GROUP_SESSION_TYPES, Actor, Message, Revoke, Role, Slot

_MODERATORS = frozenset({Role.OWNER, Role.APP_ADMIN})


def check_revoke(actor: Actor, message: Message | None, sender_role: Role = Role.MEMBER) -> None:
    """Allow a revoke, or raise NotPermitted.

    The sender may revoke their own message; APP_ADMIN anything; in groups OWNER anyone's and
    ADMIN a MEMBER's. A seq whose message is not stored yet can only be revoked by OWNER or
    APP_ADMIN, since its sender cannot be checked.
    """
    if actor.role == Role.APP_ADMIN:
        return
    if message is None:
        if actor.role == Role.OWNER:
            return
        raise NotPermitted("only an owner or app admin may revoke a message not stored yet")
    if actor.user_id == message.send_id:
        return
    if message.session_type in GROUP_SESSION_TYPES:
        if actor.role == Role.OWNER:
            return
        if actor.role == Role.ADMIN and sender_role == Role.MEMBER:
            return
    raise NotPermitted(f"{actor.user_id} may not revoke a message sent by {message.send_id}")


def revoke_needs_message(actor: Actor, slot: Slot | None) -> bool:
    """Whether check_revoke would refuse actor for want of slot's message (none stored)."""
    return (slot is None or slot.message is None) and actor.role not in _MODERATORS


def check_moderator(actor: Actor, action: str) -> None:
    """Allow clear-for-everyone and physical delete to OWNER and APP_ADMIN only."""
    if actor.role not in _MODERATORS:
        raise NotPermitted(f"{action} needs the owner or app admin role")


def may_mark_read(reader_id: str, message: Message) -> bool:
    """A reader marks read only messages they did not send."""
    return message.send_id != reader_id


def make_revoke(actor: Actor, nickname: str, time_ms: int) -> Revoke:
    """The revoke tag recorded for actor."""
    return Revoke(actor.user_id, actor.role, nickname, time_ms)
