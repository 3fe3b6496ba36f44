"""The projection table (domain/projection.py): one row per test, in the table's order."""

from __future__ import annotations

import json
from dataclasses import fields

from imbucket.domain.model import (
    ContentType,
    Message,
    Revoke,
    Role,
    SessionType,
    Slot,
    Watermarks,
)
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason, project

MARKS = Watermarks(max_seq=10, min_seq=2, user_min_seq=0)


def msg(seq: int = 5, **fields: object) -> Message:
    values: dict[str, object] = {
        "send_id": "alice",
        "client_msg_id": f"c{seq}",
        "content": "secret text",
        "session_type": SessionType.GROUP,
        "send_time": 1000,
        "sender_nickname": "Alice",
    }
    values.update(fields)
    return Message(conversation_id="c", seq=seq, **values)  # type: ignore[arg-type]


def one(slot: Slot | None, seq: int = 5, marks: Watermarks = MARKS, viewer: str = "bob") -> object:
    return project(viewer, [seq], {} if slot is None else {seq: slot}, marks)[0]


def test_beyond_max_seq_is_unallocated_even_if_something_is_stored() -> None:
    assert one(Slot(message=msg(11)), seq=11) == Tombstone(11, TombstoneReason.UNALLOCATED)


def test_below_conversation_floor_is_cleared() -> None:
    assert one(Slot(message=msg(1)), seq=1) == Tombstone(1, TombstoneReason.CLEARED)


def test_below_viewer_floor_is_cleared_for_that_viewer_only() -> None:
    marks = Watermarks(max_seq=10, min_seq=0, user_min_seq=6)
    assert one(Slot(message=msg()), marks=marks) == Tombstone(5, TombstoneReason.CLEARED)
    floor = max(marks.min_seq, marks.user_min_seq)
    assert floor == marks.floor == 6


def test_cleared_wins_over_purged() -> None:
    assert one(Slot(purged=True), seq=1) == Tombstone(1, TombstoneReason.CLEARED)


def test_purged_slot() -> None:
    assert one(Slot(purged=True)) == Tombstone(5, TombstoneReason.PURGED)


def test_no_message_is_missing() -> None:
    assert one(None) == Tombstone(5, TombstoneReason.MISSING)
    assert one(Slot(revoke=Revoke("o", Role.OWNER))) == Tombstone(5, TombstoneReason.MISSING)


def test_deleted_for_viewer_reveals_nothing_but_the_seq() -> None:
    tombstone = one(Slot(message=msg(), deleted_by=frozenset({"bob"})))
    assert tombstone == Tombstone(5, TombstoneReason.DELETED)
    assert [field.name for field in fields(Tombstone)] == ["seq", "reason"]


def test_deleted_wins_over_revoke() -> None:
    slot = Slot(message=msg(), revoke=Revoke("alice", Role.MEMBER), deleted_by=frozenset({"bob"}))
    assert one(slot) == Tombstone(5, TombstoneReason.DELETED)


def test_revoke_replaces_content_by_a_notice() -> None:
    revoke = Revoke("olivia", Role.OWNER, "Olivia", 2000)
    view = one(Slot(message=msg(), revoke=revoke))
    assert isinstance(view, MessageView)
    assert view.revoked == revoke
    assert view.content_type == ContentType.REVOKE_NOTIFICATION
    assert "secret text" not in view.content
    assert view.message.content == view.content  # the original is not reachable via the view
    notice = json.loads(view.content)
    assert notice == {
        "clientMsgID": "c5",
        "revokeTime": 2000,
        "revokerID": "olivia",
        "revokerNickname": "Olivia",
        "revokerRole": int(Role.OWNER),
        "seq": 5,
        "sessionType": int(SessionType.GROUP),
        "sourceMessageSendID": "alice",
        "sourceMessageSendTime": 1000,
        "sourceMessageSenderNickname": "Alice",
    }


def test_plain_message_view() -> None:
    view = one(Slot(message=msg()))
    assert view == MessageView(5, msg(), revoked=None, is_read=None)
    assert isinstance(view, MessageView) and view.content == "secret text"


def test_is_read_exposed_for_single_chats_only() -> None:
    single = msg(session_type=SessionType.SINGLE)
    assert one(Slot(message=single, is_read=True)).is_read is True  # type: ignore[union-attr]
    assert one(Slot(message=single)).is_read is False  # type: ignore[union-attr]
    assert one(Slot(message=msg(), is_read=True)).is_read is None  # type: ignore[union-attr]


def test_pending_reader_counts_only_when_not_the_sender() -> None:
    single = msg(session_type=SessionType.SINGLE)
    by_bob = Slot(message=single, read_by=frozenset({"bob"}))
    by_sender = Slot(message=single, read_by=frozenset({"alice"}))
    assert one(by_bob).is_read is True  # type: ignore[union-attr]
    assert one(by_sender).is_read is False  # type: ignore[union-attr]


def test_one_entry_per_seq_in_requested_order() -> None:
    slots = {3: Slot(message=msg(3)), 7: Slot(message=msg(7))}
    entries = project("bob", [7, 12, 3, 1, 4], slots, MARKS)
    assert [e.seq for e in entries] == [7, 12, 3, 1, 4]
    assert [type(e).__name__ for e in entries] == [
        "MessageView",
        "Tombstone",
        "MessageView",
        "Tombstone",
        "Tombstone",
    ]


def test_same_fact_projects_differently_per_viewer() -> None:
    slot = Slot(message=msg(), deleted_by=frozenset({"carol"}))
    marks = Watermarks(max_seq=10)
    assert isinstance(project("bob", [5], {5: slot}, marks)[0], MessageView)
    assert project("carol", [5], {5: slot}, marks)[0] == Tombstone(5, TombstoneReason.DELETED)
