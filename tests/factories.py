"""Builders of test messages and drafts."""

from __future__ import annotations

from typing import Any

from domain.model import Draft, Message, SessionType

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


def messages(first: int, last: int, conversation_id: str = CONV, **fields: Any) -> list[Message]:
    """Messages for seqs first..last inclusive."""
    return [message(seq, conversation_id, **fields) for seq in range(first, last + 1)]


def draft(n: int, send_id: str = "alice", **fields: Any) -> Draft:
    """A draft numbered n."""
    values: dict[str, Any] = {"session_type": SessionType.GROUP, "group_id": "g1"}
    values.update(fields)
    return Draft(send_id=send_id, content=f"draft {n}", client_msg_id=f"draft-{n}", **values)
