"""The permission rules through the service, on every backend: each allowed and refused.

A refused action raises NotPermitted and leaves a full dump of the store unchanged; actions
on one's own view change nobody else's view. tests/unit/test_policy.py checks the same rules
on the pure policy functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.domain.errors import NotPermitted
from imbucket.domain.model import Actor, ContentType, Role, SessionType
from imbucket.domain.projection import Entry, MessageView, Tombstone, TombstoneReason
from imbucket.testing.dump import dump
from imbucket.testing.factories import CONV, message

SINGLE = "si_alice_bob"
USERS = ("alice", "bob", "carol", "adam", "olivia", "root")
MEMBER = Actor("bob")
ADMIN = Actor("adam", Role.ADMIN)
OWNER = Actor("olivia", Role.OWNER)
APP_ADMIN = Actor("root", Role.APP_ADMIN)
UNSTORED = (4, 5)  # allocated in CONV, no message stored yet


@pytest.fixture
def chat(service: MessageService) -> MessageService:
    """A group chat (1 by alice, 2 by adam, 3 by olivia) and a single chat alice <-> bob."""
    service.ingest(CONV, [message(1), message(2, send_id="adam"), message(3, send_id="olivia")])
    service.seqs.raise_max_seq(CONV, max(UNSTORED))
    single = {"session_type": SessionType.SINGLE, "group_id": "", "recv_id": "bob"}
    service.ingest(
        SINGLE,
        [message(1, SINGLE, **single), message(2, SINGLE, **{**single, "send_id": "bob"})],
    )
    return service


def refused(service: MessageService, action: Callable[[], object]) -> None:
    """action raises NotPermitted and writes nothing."""
    before = dump(service, (CONV, SINGLE), USERS)
    with pytest.raises(NotPermitted):
        action()
    assert dump(service, (CONV, SINGLE), USERS) == before


def revoker(service: MessageService, conversation: str, seq: int) -> str | None:
    slot = service.store.get(conversation, [seq]).get(seq)
    return None if slot is None or slot.revoke is None else slot.revoke.user_id


def views(service: MessageService, conversation: str) -> dict[str, list[Entry]]:
    seqs = list(range(1, service.max_seq(conversation) + 1))
    return {user: service.pull(conversation, user, seqs) for user in USERS}


def test_the_sender_may_revoke_their_own_message(chat: MessageService) -> None:
    refused(chat, lambda: chat.revoke(CONV, 1, MEMBER))
    refused(chat, lambda: chat.revoke(SINGLE, 1, Actor("bob")))  # the receiver
    assert chat.revoke(CONV, 1, Actor("alice"))
    assert chat.revoke(SINGLE, 1, Actor("alice"))
    assert revoker(chat, CONV, 1) == revoker(chat, SINGLE, 1) == "alice"


def test_an_owner_may_revoke_anyones_message_in_groups_only(chat: MessageService) -> None:
    refused(chat, lambda: chat.revoke(SINGLE, 2, Actor("alice", Role.OWNER)))
    assert chat.revoke(CONV, 2, OWNER, sender_role=Role.ADMIN)
    assert revoker(chat, CONV, 2) == "olivia"


def test_an_admin_may_revoke_a_members_message_only(chat: MessageService) -> None:
    for sender_role in (Role.ADMIN, Role.OWNER):
        refused(chat, lambda role=sender_role: chat.revoke(CONV, 3, ADMIN, sender_role=role))
    refused(chat, lambda: chat.revoke(SINGLE, 2, Actor("alice", Role.ADMIN)))
    assert chat.revoke(CONV, 1, ADMIN, sender_role=Role.MEMBER)
    assert revoker(chat, CONV, 1) == "adam"


def test_an_app_admin_may_revoke_anything(chat: MessageService) -> None:
    # Where even an owner is refused (a single chat), the app admin is not.
    refused(chat, lambda: chat.revoke(SINGLE, 1, Actor("olivia", Role.OWNER)))
    assert chat.revoke(SINGLE, 1, APP_ADMIN)
    assert chat.revoke(CONV, 3, APP_ADMIN, sender_role=Role.OWNER)
    assert chat.revoke(CONV, UNSTORED[0], APP_ADMIN)
    assert {revoker(chat, SINGLE, 1), revoker(chat, CONV, 3), revoker(chat, CONV, 4)} == {"root"}


def test_revoking_twice_is_a_no_op(chat: MessageService) -> None:
    assert chat.revoke(CONV, 1, Actor("alice"))
    before = dump(chat, (CONV, SINGLE), USERS)
    for actor in (Actor("alice"), OWNER, APP_ADMIN, MEMBER):
        assert chat.revoke(CONV, 1, actor) is False
    assert dump(chat, (CONV, SINGLE), USERS) == before
    assert revoker(chat, CONV, 1) == "alice"


def test_a_message_not_stored_yet_is_revoked_by_owner_or_app_admin_only(
    chat: MessageService,
) -> None:
    first, second = UNSTORED
    for actor in (Actor("alice"), ADMIN):
        refused(chat, lambda actor=actor: chat.revoke(CONV, first, actor))
    assert chat.revoke(CONV, first, OWNER)
    assert chat.revoke(CONV, second, APP_ADMIN)
    chat.ingest(CONV, [message(first), message(second)])
    for seq in UNSTORED:
        [seen] = chat.pull(CONV, "carol", [seq])
        assert (
            isinstance(seen, MessageView) and seen.content_type == ContentType.REVOKE_NOTIFICATION
        )


MODERATED: dict[str, Callable[[MessageService, Actor], Any]] = {
    "clear for everyone": lambda service, actor: service.clear_for_everyone(CONV, actor),
    "purge": lambda service, actor: service.purge(CONV, [1, 4], actor),
}


@pytest.mark.parametrize("action", sorted(MODERATED))
def test_clear_for_everyone_and_purge_need_owner_or_app_admin(
    chat: MessageService, action: str
) -> None:
    act = MODERATED[action]
    for actor in (MEMBER, ADMIN, Actor("alice")):  # alice sent seq 1: no help
        refused(chat, lambda actor=actor: act(chat, actor))
    for actor in (OWNER, APP_ADMIN):
        act(chat, actor)
    expected = TombstoneReason.CLEARED if action == "clear for everyone" else TombstoneReason.PURGED
    for user in USERS:
        assert chat.pull(CONV, user, [1]) == [Tombstone(1, expected)]


def test_delete_for_me_changes_only_the_callers_view(chat: MessageService) -> None:
    before = views(chat, CONV)
    assert chat.delete_for_me(CONV, [1, 3, 4], "bob") == 3  # any seq, anyone's message
    after = views(chat, CONV)
    assert {u: v for u, v in after.items() if u != "bob"} == {
        u: v for u, v in before.items() if u != "bob"
    }
    deleted = [Tombstone(seq, TombstoneReason.DELETED) for seq in (1, 3)]
    assert [after["bob"][0], after["bob"][2]] == deleted
    chat.ingest(CONV, [message(4)])
    assert chat.pull(CONV, "bob", [4]) == [Tombstone(4, TombstoneReason.DELETED)]
    assert isinstance(chat.pull(CONV, "carol", [4])[0], MessageView)


def test_clear_history_changes_only_the_callers_view(chat: MessageService) -> None:
    before = views(chat, CONV)
    assert chat.clear_history(CONV, "carol") == max(UNSTORED) + 1
    after = views(chat, CONV)
    assert {u: v for u, v in after.items() if u != "carol"} == {
        u: v for u, v in before.items() if u != "carol"
    }
    assert after["carol"] == [
        Tombstone(seq, TombstoneReason.CLEARED) for seq in range(1, max(UNSTORED) + 1)
    ]
    assert chat.seqs.min_seq(CONV) == 0


def test_mark_read_never_marks_the_readers_own_messages(chat: MessageService) -> None:
    slots = chat.store.get(SINGLE, [1, 2])
    assert chat.mark_read(SINGLE, [2], "bob") == 0  # bob sent seq 2
    assert chat.store.get(SINGLE, [1, 2]) == slots
    assert chat.mark_read(SINGLE, [1, 2], "bob") == 1
    seen = chat.pull(SINGLE, "alice", [1, 2])
    assert [e.is_read for e in seen if isinstance(e, MessageView)] == [True, False]
