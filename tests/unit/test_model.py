"""Validation of messages, drafts, ids and seqs (what a store accepts), and slot patches."""

from __future__ import annotations

from dataclasses import replace

import pytest

from imbucket.domain.errors import (
    ContentTooLarge,
    ConversationMismatch,
    InvalidArgument,
    InvalidMessage,
    InvalidSeq,
)
from imbucket.domain.model import (
    EMPTY_SLOT,
    PURGED_SLOT,
    Limits,
    Message,
    Revoke,
    Role,
    Slot,
    SlotPatch,
)
from imbucket.domain.validation import check_draft, check_id, check_message, check_seqs
from imbucket.testing.factories import draft, message


def test_valid_message_passes() -> None:
    assert check_message(message(1), "sg_contract") == message(1)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"seq": 0}, InvalidSeq),
        ({"seq": True}, InvalidSeq),
        ({"send_id": ""}, InvalidMessage),
        ({"client_msg_id": 5}, InvalidMessage),
        ({"content": b"bytes"}, InvalidMessage),
        ({"content": "\x00"}, InvalidMessage),
        ({"content": "\ud800"}, InvalidMessage),
        ({"content": "é" * 40_000}, ContentTooLarge),
        ({"session_type": 9}, InvalidMessage),
        ({"send_time": -1}, InvalidMessage),
        ({"send_time": 2**64}, InvalidMessage),
        ({"status": "2"}, InvalidMessage),
        ({"options": {"a": 1}}, InvalidMessage),
        ({"options": []}, InvalidMessage),
        ({"recv_id": "x" * 300}, InvalidMessage),
    ],
)
def test_bad_message_fields(change: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        check_message(replace(message(1), **change), "sg_contract")  # type: ignore[arg-type]


def test_content_with_newlines_and_unicode_is_fine() -> None:
    check_message(message(1, content="line one\nline two\t😀"), "sg_contract")


def test_message_for_another_conversation() -> None:
    with pytest.raises(ConversationMismatch):
        check_message(message(1, "sg_other"), "sg_contract")


def test_content_limit_is_configurable() -> None:
    small = Limits(max_content_bytes=4)
    check_message(message(1, content="abcd"), "sg_contract", small)
    with pytest.raises(ContentTooLarge):
        check_message(message(1, content="abcde"), "sg_contract", small)


def test_draft_checks() -> None:
    assert check_draft(draft(1)) == draft(1)
    with pytest.raises(InvalidMessage):
        check_draft(message(1))
    with pytest.raises(InvalidMessage):
        check_draft(draft(1, send_id="a\nb"))


@pytest.mark.parametrize("bad", ["", None, 5, {"$ne": 1}, "a\x00b", "x" * 201, ["a"]])
def test_bad_ids(bad: object) -> None:
    with pytest.raises(InvalidArgument):
        check_id(bad, "conversation_id")


def test_check_seqs_keeps_order_and_drops_repeats() -> None:
    assert check_seqs([5, 1, 5, 3]) == [5, 1, 3]
    with pytest.raises(InvalidArgument):
        check_seqs(list(range(1, 1002)))
    with pytest.raises(InvalidArgument):
        check_seqs({1, 2})


def test_patch_set_adds_are_idempotent() -> None:
    once = EMPTY_SLOT.patched(SlotPatch(add_deleted_by="bob"))
    assert once.patched(SlotPatch(add_deleted_by="bob")) == once
    assert once.deleted_by == {"bob"}


def test_patch_keeps_message_and_revoke() -> None:
    slot = Slot(message=message(1), revoke=Revoke("a", Role.MEMBER))
    patched = slot.patched(SlotPatch(set_read=True, add_read_by="bob"))
    assert patched.message == slot.message and patched.revoke == slot.revoke
    assert patched.is_read and patched.read_by == {"bob"}


def test_purge_drops_everything_and_is_final() -> None:
    slot = Slot(message=message(1), deleted_by=frozenset({"bob"}), is_read=True)
    assert slot.patched(SlotPatch(purge=True)) == PURGED_SLOT
    assert PURGED_SLOT.patched(SlotPatch(add_deleted_by="carol")) == PURGED_SLOT


def test_empty_slot() -> None:
    assert Slot().is_empty
    assert not Slot(deleted_by=frozenset({"a"})).is_empty
    assert not PURGED_SLOT.is_empty
    assert isinstance(message(1), Message)
