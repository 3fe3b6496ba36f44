"""Builders of test messages and drafts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from imbucket.domain.model import (
    DEFAULT_LIMITS,
    Draft,
    Limits,
    Message,
    OfflinePush,
    SessionType,
    message_bytes,
)

CONV = "sg_contract"


def message(seq: int, conversation_id: str = CONV, **fields: Any) -> Message:
    """A group message with deterministic fields for seq."""
    values: dict[str, Any] = {
        "send_id": "alice",
        "client_msg_id": f"client-{seq}",
        "server_msg_id": f"server-{seq}",
        "content": f"message {seq}",
        "group_id": "g1",
        "session_type": SessionType.GROUP,
        "send_time": 1_700_000_000_000 + seq,
        "create_time": 1_700_000_000_000 + seq,
    }
    values.update(fields)
    return Message(conversation_id=conversation_id, seq=seq, **values)


def every_field(seq: int) -> dict[str, Any]:
    """The message fields a plain ``message`` leaves at their defaults, each set (OpenIM's)."""
    return {
        "sender_nickname": f"Alice {seq}",
        "sender_platform_id": 5,
        "sender_face_url": f"https://img.example/a/{seq}.png",
        "msg_from": 100,
        "is_read": seq % 2 == 0,
        "options": {"history": True, "unreadCount": False},
        "offline_push": OfflinePush("title", f"desc {seq}", "{}", "ring.caf", seq % 3 == 0),
        "at_user_id_list": ("bob", "carol") if seq % 2 else (),
        "attached_info": '{"isPrivateChat": false}',
        "ex": f"ex {seq}",
    }


def full_message(seq: int, conversation_id: str = CONV, **fields: Any) -> Message:
    """``message`` with every field OpenIM stores set (``every_field``)."""
    return message(seq, conversation_id, **{**every_field(seq), **fields})


def messages(first: int, last: int, conversation_id: str = CONV, **fields: Any) -> list[Message]:
    """Messages for seqs first..last inclusive."""
    return [message(seq, conversation_id, **fields) for seq in range(first, last + 1)]


def draft(n: int, send_id: str = "alice", **fields: Any) -> Draft:
    """A draft numbered n."""
    values: dict[str, Any] = {"session_type": SessionType.GROUP, "group_id": "g1"}
    values.update(fields)
    return Draft(send_id=send_id, content=f"draft {n}", client_msg_id=f"draft-{n}", **values)


WIDE = "\U0001f600"  # a 4-byte character of UTF-8


def largest_draft(n: int, limits: Limits = DEFAULT_LIMITS) -> Draft:
    """A draft at every limit in 4-byte characters.

    Content at max_content_bytes, every id and short text at max_id_length, topped up with ex
    to max_message_bytes; client_msg_id is unique per n (0 <= n < 10,000) and as long as an
    id may be.
    """
    longest, number = WIDE * limits.max_id_length, f"{n:04d}"
    draft = Draft(
        send_id=longest,
        content=WIDE * (limits.max_content_bytes // 4),
        client_msg_id=number + WIDE * (limits.max_id_length - len(number)),
        session_type=SessionType.GROUP,
        recv_id=longest,
        group_id=longest,
        sender_nickname=longest,
    )
    room = limits.max_message_bytes - message_bytes(draft, limits.max_id_length)
    return replace(draft, ex=WIDE * (room // 4))


def largest_message(seq: int, conversation_id: str, limits: Limits = DEFAULT_LIMITS) -> Message:
    """largest_draft as a stored message, with a server_msg_id as long as an id may be."""
    d = largest_draft(seq, limits)
    return Message(
        conversation_id=conversation_id,
        seq=seq,
        send_id=d.send_id,
        client_msg_id=d.client_msg_id,
        content=d.content,
        recv_id=d.recv_id,
        group_id=d.group_id,
        server_msg_id=WIDE * limits.max_id_length,
        session_type=d.session_type,
        send_time=1_700_000_000_000,
        create_time=1_700_000_000_000,
        sender_nickname=d.sender_nickname,
        ex=d.ex,
    )
