"""domain.migration: which target slots a copy may complete, and when two slots look alike."""

from __future__ import annotations

import pytest

from imbucket.domain.migration import reachable, same_views, sizes_need_checking
from imbucket.domain.model import (
    EMPTY_SLOT,
    PURGED_SLOT,
    Limits,
    Revoke,
    Role,
    SessionType,
    Slot,
)
from imbucket.testing.factories import message

MESSAGE = message(1)
REVOKE = Revoke("alice", Role.MEMBER)
FULL = Slot(MESSAGE, REVOKE, frozenset({"bob"}), is_read=True, read_by=frozenset({"carol"}))


@pytest.mark.parametrize(
    "target",
    [
        EMPTY_SLOT,
        Slot(read_by=frozenset({"carol"})),
        Slot(deleted_by=frozenset({"bob"}), read_by=frozenset({"carol"}), revoke=REVOKE),
        Slot(MESSAGE, read_by=frozenset({"carol"})),
        FULL,
    ],
)
def test_a_target_holding_part_of_the_source_may_be_completed(target: Slot) -> None:
    assert reachable(target, FULL)


@pytest.mark.parametrize(
    "target",
    [
        Slot(message(1, content="other")),  # another message
        Slot(revoke=Revoke("olivia", Role.OWNER)),  # another revoke
        Slot(deleted_by=frozenset({"erin"})),  # a deleter the source lacks
        Slot(read_by=frozenset({"erin"})),
        Slot(MESSAGE),  # early readers cannot be added once the message is there
        PURGED_SLOT,  # purge is final
    ],
)
def test_a_target_holding_something_else_is_a_conflict(target: Slot) -> None:
    assert not reachable(target, FULL)


def test_anything_may_still_be_purged() -> None:
    assert reachable(FULL, PURGED_SLOT)
    assert not reachable(Slot(is_read=True, message=MESSAGE), Slot(message=MESSAGE))


def test_same_views_ignores_the_spilled_flag_but_sees_every_viewer() -> None:
    assert same_views(
        1,
        FULL,
        Slot(FULL.message, REVOKE, FULL.deleted_by, True, False, FULL.read_by, spilled=True),
    )
    assert not same_views(1, FULL, Slot(MESSAGE, REVOKE, frozenset({"dave"}), is_read=True))
    assert not same_views(1, Slot(MESSAGE), None)
    assert not same_views(1, Slot(MESSAGE), Slot(MESSAGE, REVOKE))


def test_same_views_compares_what_shows_later_too() -> None:
    pending = Slot(read_by=frozenset({"bob"}))
    assert not same_views(1, pending, Slot(read_by=frozenset({"carol"})))
    assert not same_views(1, Slot(deleted_by=frozenset({"bob"})), EMPTY_SLOT)
    single = message(1, session_type=SessionType.SINGLE, group_id="")
    assert not same_views(1, Slot(single, is_read=True), Slot(single))
    assert same_views(1, PURGED_SLOT, PURGED_SLOT)
    assert same_views(1, EMPTY_SLOT, None)


@pytest.mark.parametrize(
    ("source", "target", "checked"),
    [
        (Limits(), Limits(), False),
        (Limits(max_message_bytes=10_000), Limits(), False),
        (Limits(max_message_bytes=10_000, max_id_length=500), Limits(max_id_length=50), False),
        (Limits(), Limits(max_message_bytes=10_000), True),
    ],
)
def test_sizes_are_checked_only_when_the_source_allows_larger_messages(
    source: Limits, target: Limits, checked: bool
) -> None:
    assert sizes_need_checking(source, target) is checked
