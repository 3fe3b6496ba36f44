"""Validation of what enters a store: ids, batches, seqs, roles, actors, messages, drafts.

Every check raises ``InvalidArgument`` or ``InvalidMessage`` (``ContentTooLarge`` for what is
over a size limit) before anything is written; the limits are ``imbucket.domain.model.Limits``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sized
from enum import IntEnum

from imbucket.domain.errors import (
    ContentTooLarge,
    ConversationMismatch,
    InvalidArgument,
    InvalidMessage,
)
from imbucket.domain.layout import check_seq
from imbucket.domain.model import (
    DEFAULT_LIMITS,
    INT_FIELDS,
    LONG_TEXT_FIELDS,
    MAX_INT64,
    MAX_SEQ,
    OFFLINE_PUSH_FIELDS,
    SHORT_TEXT_FIELDS,
    Actor,
    Draft,
    Limits,
    Message,
    OfflinePush,
    Role,
    SessionType,
    carried_fields,
    message_bytes,
    message_bytes_at_most,
)


def check_id(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """Return value if it is a usable id: a non-empty printable str within the length limit."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidArgument(f"{what} must not be empty")
    if len(value) > limits.max_id_length:
        raise InvalidArgument(f"{what} is longer than {limits.max_id_length} characters")
    _check_text(value, what, InvalidArgument, allow_newlines=False)
    return value


def check_batch(
    items: object, what: str, limits: Limits = DEFAULT_LIMITS, *, ranges: bool = False
) -> list[object]:
    """Return items as a list, or raise InvalidArgument.

    items must be a list or a tuple (or a range, when ranges) of at most
    limits.max_seqs_per_call items.
    """
    if (
        isinstance(items, str | bytes)
        or not isinstance(items, list | tuple | range)
        or (isinstance(items, range) and not ranges)
    ):
        raise InvalidArgument(f"{what} must be a list, got {type(items).__name__}")
    if _length(items) > limits.max_seqs_per_call:
        raise InvalidArgument(f"at most {limits.max_seqs_per_call} {what} per call")
    return list(items)


def check_seqs(seqs: object, limits: Limits = DEFAULT_LIMITS) -> list[int]:
    """Validate a list of seqs (each an int in 1..2**63-1), keeping order, dropping repeats."""
    checked = check_batch(seqs, "seqs", limits, ranges=True)
    return list(dict.fromkeys(check_bounded_seq(seq) for seq in checked))


def _length(items: Sized) -> int:
    """len(items); a range too long for a C integer (len raises OverflowError) counts as huge."""
    try:
        return len(items)
    except OverflowError:
        return MAX_INT64


def check_bounded_seq(seq: object) -> int:
    """check_seq, also refusing seqs that do not fit a signed 64-bit integer."""
    value = check_seq(seq)
    if value > MAX_INT64:
        raise InvalidArgument(f"seq {value} does not fit in 64 bits")
    return value


def check_role(role: object) -> Role:
    """Return role as a Role, or raise InvalidArgument."""
    if isinstance(role, bool) or not isinstance(role, int):
        raise InvalidArgument(f"role must be a Role, got {type(role).__name__}")
    try:
        return Role(role)
    except ValueError:
        raise InvalidArgument(f"unknown role {role!r}") from None


def check_actor(actor: object, limits: Limits = DEFAULT_LIMITS) -> Actor:
    """Return actor if it is a well-formed Actor."""
    if not isinstance(actor, Actor):
        raise InvalidArgument(f"actor must be an Actor, got {type(actor).__name__}")
    check_id(actor.user_id, "actor.user_id", limits)
    check_role(actor.role)
    return actor


def check_message(
    message: object, conversation_id: str, limits: Limits = DEFAULT_LIMITS
) -> Message:
    """Validate one message for ``conversation_id`` before anything is written."""
    if not isinstance(message, Message):
        raise InvalidMessage(f"expected a Message, got {type(message).__name__}")
    if message.conversation_id != conversation_id:
        raise ConversationMismatch(
            f"message for {message.conversation_id!r} given to conversation {conversation_id!r}"
        )
    if check_bounded_seq(message.seq) > MAX_SEQ:
        raise InvalidMessage(f"seq {message.seq} is above the highest storable seq 2**62")
    _check_fields(message, limits)
    return message


def check_draft(draft: object, limits: Limits = DEFAULT_LIMITS) -> Draft:
    """Validate one draft before seqs are allocated for it."""
    if not isinstance(draft, Draft):
        raise InvalidMessage(f"expected a Draft, got {type(draft).__name__}")
    _check_fields(draft, limits)
    return draft


# The ids every message needs (non-empty); the other short texts may be empty.
_IDS = ("send_id", "client_msg_id")


def _check_fields(item: Message | Draft, limits: Limits) -> None:
    stored = carried_fields(item)
    try:
        for name in _IDS:
            check_id(getattr(item, name), name, limits)
        for name in SHORT_TEXT_FIELDS:
            if name in stored and name not in _IDS:
                check_short_text(getattr(item, name), name, limits)
        for name in INT_FIELDS:
            if name in stored:
                _check_int(getattr(item, name), name)
        if item.session_type not in SessionType._value2member_map_:
            raise InvalidMessage(f"unknown session_type {item.session_type}")
        _check_content(item.content, limits)
        for name in LONG_TEXT_FIELDS[1:]:
            _check_long_text(getattr(item, name), name, limits)
        if type(item.is_read) is not bool:
            raise InvalidMessage("is_read must be a bool")
        _check_options(item.options, limits)
        _check_at_users(item.at_user_id_list, limits)
        _check_offline_push(item.offline_push, limits)
        _check_size(item, limits)
    except InvalidMessage:
        raise
    except InvalidArgument as error:
        raise InvalidMessage(str(error)) from None


def _check_content(content: object, limits: Limits) -> None:
    _check_text(content, "content", InvalidMessage, allow_newlines=True)
    assert isinstance(content, str)
    size = len(content.encode())
    if size > limits.max_content_bytes:
        raise ContentTooLarge(f"content is {size} bytes, the limit is {limits.max_content_bytes}")


def _check_long_text(value: object, what: str, limits: Limits) -> None:
    _check_text(value, what, InvalidMessage, allow_newlines=True)
    assert isinstance(value, str)
    if len(value.encode()) > limits.max_content_bytes:
        raise ContentTooLarge(f"{what} is larger than {limits.max_content_bytes} bytes")


def _check_at_users(users: object, limits: Limits) -> None:
    """A tuple (so that a message stays comparable to the one read back) of user ids."""
    if not isinstance(users, tuple):
        raise InvalidMessage(f"at_user_id_list must be a tuple, got {type(users).__name__}")
    for user in users:
        check_id(user, "at_user_id_list entry", limits)


def _check_offline_push(push: object, limits: Limits) -> None:
    if push is None:
        return
    if not isinstance(push, OfflinePush):
        raise InvalidMessage(f"offline_push must be an OfflinePush, got {type(push).__name__}")
    for name in OFFLINE_PUSH_FIELDS[:-1]:
        _check_long_text(getattr(push, name), f"offline_push.{name}", limits)
    if type(push.ios_badge_count) is not bool:
        raise InvalidMessage("offline_push.ios_badge_count must be a bool")


def _check_size(item: Message | Draft, limits: Limits) -> None:
    if message_bytes_at_most(item, limits.max_id_length) <= limits.max_message_bytes:
        return  # the cheap bound settles nearly every message and draft
    size = message_bytes(item, limits.max_id_length)
    if size > limits.max_message_bytes:
        raise ContentTooLarge(
            f"the message takes up to {size} bytes stored, the limit is {limits.max_message_bytes}"
        )


def check_short_text(value: object, what: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """Return value if it is a printable str (may be empty) within the id length limit."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, got {type(value).__name__}")
    if len(value) > limits.max_id_length:
        raise InvalidArgument(f"{what} is longer than {limits.max_id_length} characters")
    _check_text(value, what, InvalidArgument, allow_newlines=False)
    return value


def _check_int(value: object, what: str) -> None:
    if type(value) is not int and not isinstance(value, IntEnum):
        raise InvalidMessage(f"{what} must be an int, got {type(value).__name__}")
    if not 0 <= int(value) <= MAX_INT64:
        raise InvalidMessage(f"{what} must be in 0..2**63-1, got {value}")


def _check_options(options: object, limits: Limits) -> None:
    if not isinstance(options, Mapping):
        raise InvalidMessage(f"options must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        check_short_text(key, "options key", limits)
        if type(value) is not bool:
            raise InvalidMessage("options values must be bools")


# Control characters (C0 and DEL); free text may hold line breaks and tabs.
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_CONTROL_IN_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _check_text(
    value: object, what: str, error: type[InvalidArgument], *, allow_newlines: bool
) -> None:
    if not isinstance(value, str):
        raise error(f"{what} must be a str, got {type(value).__name__}")
    if (_CONTROL_IN_TEXT if allow_newlines else _CONTROL).search(value):
        raise error(f"{what} contains control characters")
    if value.isascii():
        return
    try:
        value.encode()
    except UnicodeEncodeError:
        raise error(f"{what} is not valid Unicode text") from None
