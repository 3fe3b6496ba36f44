"""Revoke, delete-for-me, mark-read, purge and clears, including tags written before the message."""

from __future__ import annotations

import json

import pytest

from imbucket.app import MessageService
from imbucket.domain.errors import NotPermitted, SeqNotAllocated
from imbucket.domain.model import Actor, ContentType, Role, SessionType
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, message, messages
from imbucket.testing.rows import EARLY_TAGS, needs

OWNER = Actor("olivia", Role.OWNER)


def view(service: MessageService, viewer: str, seq: int) -> MessageView | Tombstone:
    return service.pull(CONV, viewer, [seq])[0]


def test_revoke_replaces_content_for_every_viewer(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 3))
    assert service.revoke(CONV, 2, Actor("alice")) is True
    for viewer in ("alice", "bob", "carol"):
        seen = view(service, viewer, 2)
        assert isinstance(seen, MessageView)
        assert seen.content_type == ContentType.REVOKE_NOTIFICATION
        assert "message 2" not in seen.content
        notice = json.loads(seen.content)
        assert notice["revokerID"] == "alice"
        assert notice["sourceMessageSendID"] == "alice"
        assert seen.revoked is not None and seen.revoked.user_id == "alice"


def test_revoking_twice_is_a_no_op(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 1))
    assert service.revoke(CONV, 1, Actor("alice")) is True
    first = service.store.get(CONV, [1])[1].revoke
    assert service.revoke(CONV, 1, OWNER) is False
    assert service.store.get(CONV, [1])[1].revoke == first


def test_revoke_refused_writes_nothing(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 1))
    with pytest.raises(NotPermitted):
        service.revoke(CONV, 1, Actor("mallory"))
    assert service.store.get(CONV, [1])[1].revoke is None


def test_revoke_before_the_message_lands_survives_the_insert(service: MessageService) -> None:
    service.ingest(CONV, [message(1)])
    service.seqs.raise_max_seq(CONV, 150)  # 150 allocated, not persisted yet
    assert service.revoke(CONV, 150, OWNER) is True
    assert service.ingest(CONV, [message(150)]).inserted == (150,)
    seen = view(service, "bob", 150)
    assert isinstance(seen, MessageView) and seen.revoked is not None
    assert seen.content_type == ContentType.REVOKE_NOTIFICATION


def test_revoke_of_unstored_message_needs_owner(service: MessageService) -> None:
    service.seqs.raise_max_seq(CONV, 5)
    with pytest.raises(NotPermitted):
        service.revoke(CONV, 5, Actor("alice"))
    assert service.store.get(CONV, [5]) == {}


def test_tags_need_an_allocated_seq(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 2))
    with pytest.raises(SeqNotAllocated):
        service.delete_for_me(CONV, [2, 3], "bob")
    with pytest.raises(SeqNotAllocated):
        service.revoke(CONV, 3, OWNER)
    assert service.store.get(CONV, [1, 2, 3])[2].deleted_by == frozenset()


def test_delete_for_me_hides_only_for_that_user(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 5))
    assert service.delete_for_me(CONV, [5], "carol") == 1
    assert view(service, "carol", 5) == Tombstone(5, TombstoneReason.DELETED)
    other = view(service, "bob", 5)
    assert isinstance(other, MessageView) and other.content == "message 5"


def test_delete_for_me_is_a_set_add(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 2))
    assert service.delete_for_me(CONV, [1, 2], "bob") == 2
    assert service.delete_for_me(CONV, [1, 2], "bob") == 0
    service.delete_for_me(CONV, [1], "carol")
    assert service.store.get(CONV, [1])[1].deleted_by == {"bob", "carol"}


def test_delete_before_the_message_lands_is_kept(service: MessageService) -> None:
    service.seqs.raise_max_seq(CONV, 230)
    service.delete_for_me(CONV, [230], "bob")
    service.ingest(CONV, [message(230)])
    assert view(service, "bob", 230) == Tombstone(230, TombstoneReason.DELETED)
    assert isinstance(view(service, "carol", 230), MessageView)


def test_revoked_and_deleted_shows_deleted_to_the_deleter(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 1))
    service.delete_for_me(CONV, [1], "bob")
    service.revoke(CONV, 1, Actor("alice"))
    assert view(service, "bob", 1) == Tombstone(1, TombstoneReason.DELETED)


def test_mark_read_marks_only_messages_of_others(service: MessageService) -> None:
    conv = "si_alice_bob"
    single = {"session_type": SessionType.SINGLE, "group_id": "", "recv_id": "bob"}
    service.ingest(conv, [message(1, conv, **single), message(2, conv, send_id="bob", **single)])
    assert service.mark_read(conv, [1, 2], "bob") == 1
    seen = service.pull(conv, "alice", [1, 2])
    assert [e.is_read for e in seen if isinstance(e, MessageView)] == [True, False]
    assert service.seqs.read_seq(conv, "bob") == 2
    assert service.mark_read(conv, [1, 2], "bob") == 0


@needs(EARLY_TAGS)
def test_mark_read_before_the_message_lands_is_kept(service: MessageService) -> None:
    conv = "si_alice_bob"
    single = {"session_type": SessionType.SINGLE, "group_id": "", "recv_id": "bob"}
    service.seqs.raise_max_seq(conv, 2)
    service.mark_read(conv, [1, 2], "bob")
    service.ingest(conv, [message(1, conv, **single), message(2, conv, send_id="bob", **single)])
    seen = service.pull(conv, "alice", [1, 2])
    assert [e.is_read for e in seen if isinstance(e, MessageView)] == [True, False]


def test_is_read_is_hidden_outside_single_chats(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 1))
    service.mark_read(CONV, [1], "bob")
    seen = view(service, "alice", 1)
    assert isinstance(seen, MessageView) and seen.is_read is None


def test_purge_is_final(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 3))
    service.delete_for_me(CONV, [2], "bob")
    service.revoke(CONV, 2, Actor("alice"))
    assert service.purge(CONV, [2], OWNER) == 1
    assert service.store.get(CONV, [2])[2].message is None
    result = service.ingest(CONV, [message(2)])
    assert result.purged == (2,) and result.inserted == ()
    for viewer in ("alice", "bob"):
        assert view(service, viewer, 2) == Tombstone(2, TombstoneReason.PURGED)
    assert service.purge(CONV, [2], OWNER) == 0
    assert service.revoke(CONV, 2, OWNER) is False
    assert service.delete_for_me(CONV, [2], "carol") == 0


def test_purge_before_the_message_lands_blocks_it(service: MessageService) -> None:
    service.seqs.raise_max_seq(CONV, 101)
    service.purge(CONV, [101], OWNER)
    assert service.ingest(CONV, messages(100, 102)).purged == (101,)
    assert view(service, "bob", 101) == Tombstone(101, TombstoneReason.PURGED)


def test_purge_and_clear_for_everyone_need_a_moderator(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 2))
    for role in (Role.MEMBER, Role.ADMIN):
        with pytest.raises(NotPermitted):
            service.purge(CONV, [1], Actor("adam", role))
        with pytest.raises(NotPermitted):
            service.clear_for_everyone(CONV, Actor("adam", role))
    assert isinstance(view(service, "bob", 1), MessageView)
    assert service.seqs.min_seq(CONV) == 0


def test_clear_history_is_per_user_and_leaves_later_messages(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 4))
    assert service.clear_history(CONV, "dave") == 5
    service.ingest(CONV, messages(5, 6))
    assert [e.seq for e in service.pull_latest(CONV, "dave")] == [5, 6]
    assert service.pull(CONV, "dave", [4]) == [Tombstone(4, TombstoneReason.CLEARED)]
    assert isinstance(view(service, "bob", 4), MessageView)


def test_clear_for_everyone_clears_all_viewers(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 3))
    assert service.clear_for_everyone(CONV, OWNER) == 4
    for viewer in ("alice", "bob"):
        assert service.pull_latest(CONV, viewer) == []
        assert service.pull(CONV, viewer, [3]) == [Tombstone(3, TombstoneReason.CLEARED)]


def test_watermarks_only_move_up(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 10))
    service.clear_history(CONV, "dave")
    assert service.seqs.raise_user_min_seq(CONV, "dave", 3) == 11
    assert service.seqs.user_min_seq(CONV, "dave") == 11
    service.seqs.raise_min_seq(CONV, 8)
    assert service.seqs.raise_min_seq(CONV, 2) == 8
    assert service.seqs.raise_read_seq(CONV, "bob", 9) == 9
    assert service.seqs.raise_read_seq(CONV, "bob", 1) == 9
    assert service.seqs.raise_max_seq(CONV, 4) == 10
