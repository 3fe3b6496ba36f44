"""Each permission rule (domain/policy.py), allowed and refused."""

from __future__ import annotations

import pytest

from imbucket.domain.errors import NotPermitted
from imbucket.domain.model import Actor, Message, Role, SessionType
from imbucket.domain.policy import check_moderator, check_revoke, may_mark_read


def msg(sender: str = "alice", session_type: int = SessionType.GROUP) -> Message:
    return Message("c", 1, sender, "c1", "hello", session_type=session_type)


def test_sender_may_revoke_own_message() -> None:
    check_revoke(Actor("alice"), msg())
    check_revoke(Actor("alice"), msg(session_type=SessionType.SINGLE))


def test_member_may_not_revoke_someone_elses() -> None:
    with pytest.raises(NotPermitted):
        check_revoke(Actor("bob"), msg())


def test_owner_may_revoke_anyones_in_groups() -> None:
    check_revoke(Actor("olivia", Role.OWNER), msg(), sender_role=Role.ADMIN)


def test_admin_may_revoke_members_but_not_admins_or_owners() -> None:
    check_revoke(Actor("adam", Role.ADMIN), msg(), sender_role=Role.MEMBER)
    for role in (Role.ADMIN, Role.OWNER):
        with pytest.raises(NotPermitted):
            check_revoke(Actor("adam", Role.ADMIN), msg(), sender_role=role)


def test_group_roles_do_not_apply_in_single_chats() -> None:
    single = msg(session_type=SessionType.SINGLE)
    for role in (Role.OWNER, Role.ADMIN):
        with pytest.raises(NotPermitted):
            check_revoke(Actor("bob", role), single)


def test_app_admin_may_revoke_anything() -> None:
    check_revoke(Actor("root", Role.APP_ADMIN), msg(session_type=SessionType.SINGLE))
    check_revoke(Actor("root", Role.APP_ADMIN), None)


def test_unstored_message_only_owner_or_app_admin() -> None:
    check_revoke(Actor("olivia", Role.OWNER), None)
    for role in (Role.MEMBER, Role.ADMIN):
        with pytest.raises(NotPermitted):
            check_revoke(Actor("alice", role), None)


@pytest.mark.parametrize("role", [Role.OWNER, Role.APP_ADMIN])
def test_moderators_may_clear_and_purge(role: Role) -> None:
    check_moderator(Actor("o", role), "physical delete")


@pytest.mark.parametrize("role", [Role.MEMBER, Role.ADMIN])
def test_others_may_not_clear_for_everyone_or_purge(role: Role) -> None:
    with pytest.raises(NotPermitted, match="physical delete"):
        check_moderator(Actor("m", role), "physical delete")


def test_mark_read_only_for_messages_of_others() -> None:
    assert may_mark_read("bob", msg("alice"))
    assert not may_mark_read("alice", msg("alice"))
