"""The article's scenario: one group, four users, one stored fact, four different views."""

from __future__ import annotations

from dataclasses import dataclass

from imbucket.app.service import MessageService
from imbucket.domain.model import Actor, Message, Role, SessionType
from imbucket.domain.projection import Entry, MessageView

DEMO_CONVERSATION = "demo-conversation"
USERS = ("olivia", "bob", "carol", "dave")
OWNER = Actor("olivia", Role.OWNER)
SHOWN_SEQS = (1, 3, 4, 5, 6, 7, 8, 100, 101, 150, 151, 152, 153)
_BASE_TIME = 1_767_225_600_000  # 2026-01-01T00:00:00Z

_SCRIPT = {
    1: ("olivia", "Welcome to the demo group!"),
    2: ("bob", "Hi all"),
    3: ("carol", "Lunch at noon?"),
    4: ("dave", "Sure, see you there"),
    5: ("bob", "Meeting moved to 3 pm"),
    6: ("carol", "oops, that was meant for someone else"),
}


@dataclass(frozen=True, slots=True)
class DemoViews:
    """What each user sees for SHOWN_SEQS."""

    conversation_id: str
    seqs: tuple[int, ...]
    views: dict[str, list[Entry]]
    replayed: bool


def demo_message(seq: int) -> Message:
    """The scripted message of seq (chatter beyond the script)."""
    sender, text = _SCRIPT.get(seq, (USERS[seq % len(USERS)], f"chatter #{seq}"))
    return Message(
        conversation_id=DEMO_CONVERSATION,
        seq=seq,
        send_id=sender,
        client_msg_id=f"demo-{seq}",
        server_msg_id=f"demo-server-{seq}",
        content=text,
        group_id="demo-group",
        session_type=SessionType.GROUP,
        send_time=_BASE_TIME + seq * 60_000,
        create_time=_BASE_TIME + seq * 60_000,
        sender_nickname=sender.title(),
    )


def play(service: MessageService) -> bool:
    """Play the scenario once per store; returns False if it was already there."""
    conv = DEMO_CONVERSATION
    if service.max_seq(conv) > 0:
        return False
    service.ingest(conv, [demo_message(seq) for seq in range(1, 5)])
    service.clear_history(conv, "dave")  # dave clears: seqs 1..4 are gone for him only
    service.ingest(conv, [demo_message(5), demo_message(6)])
    service.delete_for_me(conv, [5], "bob")  # bob deletes seq 5 for himself
    service.revoke(conv, 6, Actor("carol"), nickname="Carol")  # carol revokes her own seq 6
    service.seqs.allocate(conv, 146)  # seqs 7..152 allocated; 7 is lost in transit (a gap)
    service.ingest(conv, [demo_message(seq) for seq in range(8, 153)])
    service.purge(conv, [151], OWNER)  # the owner physically deletes seq 151
    return True


def views(service: MessageService, replayed: bool) -> DemoViews:
    """Every user's view of SHOWN_SEQS."""
    return DemoViews(
        conversation_id=DEMO_CONVERSATION,
        seqs=SHOWN_SEQS,
        views={user: service.pull(DEMO_CONVERSATION, user, list(SHOWN_SEQS)) for user in USERS},
        replayed=replayed,
    )


def cell_text(entry: Entry) -> str:
    """One table cell."""
    if isinstance(entry, MessageView):
        if entry.revoked is not None:
            return f"↩ revoked by {entry.revoked.user_id}"
        return entry.content if len(entry.content) <= 28 else entry.content[:27] + "…"
    return f"<{entry.reason.value}>"
