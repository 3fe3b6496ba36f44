"""The send rules, the watermark helpers and the budget rule as pure functions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from imbucket.domain import sending
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import InvalidMessage, WriteConflict
from imbucket.domain.model import (
    EMPTY_SLOT,
    MESSAGE_FIELDS,
    PURGED_SLOT,
    STAMPED_FIELDS,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Role,
    Slot,
    SlotPatch,
    Watermarks,
)
from imbucket.domain.tags import takes_revoke
from imbucket.testing.factories import CONV, draft, message


def test_stamp_copies_the_draft_and_adds_seq_server_id_and_time() -> None:
    stamped = sending.stamp(CONV, draft(1, options={"a": True}), 7, "srv", 1234)
    assert stamped == Message(
        conversation_id=CONV,
        seq=7,
        send_id="alice",
        client_msg_id="draft-1",
        content="draft 1",
        group_id="g1",
        server_msg_id="srv",
        session_type=draft(1).session_type,
        send_time=1234,
        create_time=1234,
        options={"a": True},
    )


def test_the_stamped_fields_are_those_a_draft_lacks() -> None:
    assert STAMPED_FIELDS == ("seq", "server_msg_id", "send_time", "create_time", "status")
    assert "conversation_id" not in MESSAGE_FIELDS


def test_a_batch_must_not_repeat_a_client_msg_id() -> None:
    sending.check_unique([draft(1), draft(2)])
    with pytest.raises(InvalidMessage):
        sending.check_unique([draft(1), replace(draft(1), content="again")])


def test_a_claimed_seq_answers_a_retry_of_the_same_sender_only() -> None:
    stored = sending.stamp(CONV, draft(1), 3, "srv", 1)
    retry = replace(draft(1), content="edited")  # other fields are not compared
    assert sending.answer(retry, 3, Slot(message=stored)) == stored
    assert sending.answer(draft(1), 3, None) is None  # not stored yet
    assert sending.answer(draft(1), 3, Slot(deleted_by=frozenset({"bob"}))) is None
    with pytest.raises(WriteConflict, match="purged"):
        sending.answer(draft(1), 3, PURGED_SLOT)
    with pytest.raises(WriteConflict, match="another message"):
        sending.answer(draft(1, send_id="mallory"), 3, Slot(message=stored))
    with pytest.raises(WriteConflict, match="another message"):
        sending.answer(draft(1), 3, Slot(message=replace(stored, client_msg_id="x")))


def test_answers_covers_only_drafts_with_a_claim() -> None:
    stored = sending.stamp(CONV, draft(1), 3, "srv", 1)
    found = sending.answers([draft(1), draft(2)], {"draft-1": 3}, {3: Slot(message=stored)})
    assert found == {"draft-1": stored}


def test_an_insert_settles_inserted_and_duplicate_messages() -> None:
    pending = [message(1), message(2), message(3)]
    result = InsertResult(inserted=(1,), duplicates=(3,), conflicts=(2,))
    assert sending.stored(pending, result) == [message(1), message(3)]
    sending.check_settled([draft(1)], {"draft-1"})
    with pytest.raises(WriteConflict):
        sending.check_settled([draft(1), draft(2)], {"draft-1"})


def test_insert_result_groups_outcomes_in_input_order() -> None:
    outcome = {
        3: InsertOutcome.INSERTED,
        1: InsertOutcome.CONFLICT,
        2: InsertOutcome.INSERTED,
        4: InsertOutcome.PURGED,
    }
    result = InsertResult.of([message(3), message(1), message(2), message(4)], outcome)
    assert result == InsertResult(inserted=(3, 2), conflicts=(1,), purged=(4,))


def test_insert_result_of_one_message_names_its_outcome() -> None:
    for kind in InsertOutcome:
        result = InsertResult.of([message(5)], {5: kind})
        assert result == InsertResult(**{kind.value: (5,)})


def test_numbered_messages_differ_from_theirs_only_by_seq() -> None:
    given = [sending.stamp(CONV, draft(n, options={"a": True}), 0, f"s{n}", 9) for n in (1, 2)]
    assert sending.numbered(given, 41) == [replace(m, seq=s) for s, m in enumerate(given, 41)]


def test_the_pull_window_and_the_clear_floor() -> None:
    marks = Watermarks(max_seq=10, min_seq=4, user_min_seq=6)
    assert marks.latest(3) == [8, 9, 10]
    assert marks.latest(20) == [6, 7, 8, 9, 10]  # not below the viewer's floor
    assert Watermarks().latest(20) == []
    assert marks.visible([12, 5, 6, 10]) == [6, 10]
    assert Watermarks.clearing(10) == 11


def test_the_budget_rule_of_a_patch() -> None:
    budget = TagBudget(deleters_per_slot=2, deleters_per_bucket=3, readers_per_slot=1)
    bucket = [Slot(deleted_by=frozenset({"a", "b"})), EMPTY_SLOT, Slot(read_by=frozenset({"r"}))]
    delete_1 = budget.conditions({1: SlotPatch(add_deleted_by="c")})
    assert delete_1.holds(bucket)
    assert not budget.conditions(
        {1: SlotPatch(add_deleted_by="c"), 0: SlotPatch(add_deleted_by="c")}
    ).holds(bucket)
    assert not budget.conditions({2: SlotPatch(add_read_by="s")}).holds(bucket)
    assert budget.conditions({0: SlotPatch(add_deleted_by="c", purge=True)}).holds(bucket)
    full = [Slot(deleted_by=frozenset({"a", "b"})), Slot(deleted_by=frozenset({"c"})), EMPTY_SLOT]
    assert not budget.conditions({2: SlotPatch(add_deleted_by="d")}).holds(full)


def test_a_revoke_is_written_once_and_never_on_a_purged_slot() -> None:
    assert takes_revoke(EMPTY_SLOT)
    assert takes_revoke(Slot(message=message(1)))
    assert not takes_revoke(Slot(revoke=Revoke("alice", Role.MEMBER)))
    assert not takes_revoke(PURGED_SLOT)
