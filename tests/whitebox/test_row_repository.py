"""The RowRepository primitives the row state machine relies on, on every row backend."""

from __future__ import annotations

import pytest

from imbucket.domain.model import PURGED_SLOT, Revoke, Role, Slot, SlotPatch
from imbucket.ports.message_store import MessageStore
from imbucket.ports.row_repository import RowRepository
from imbucket.testing.factories import message, messages
from imbucket.testing.rows import ROW_LAYOUT, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(ROW_LAYOUT), indirect=True)

CONV = "sg_rows"
REVOKE = Revoke("olivia", Role.OWNER, "Olivia", 1_700_000_000_000)


@pytest.fixture
def repository(store: MessageStore) -> RowRepository:
    repo: RowRepository = store.repository  # type: ignore[attr-defined]
    assert isinstance(repo, RowRepository)
    return repo


def test_insert_new_reports_the_rows_holding_a_message_or_purged(
    repository: RowRepository,
) -> None:
    assert repository.insert_new(CONV, messages(1, 3, CONV)) == set()
    assert repository.patch(CONV, {5: SlotPatch(purge=True)}) == 1
    collided = repository.insert_new(CONV, [message(2, CONV, content="x"), *messages(4, 5, CONV)])
    assert collided == {2, 5}
    found = repository.read(CONV, [1, 2, 3, 4, 5])
    assert [found[s].message for s in (1, 2, 3, 4)] == messages(1, 4, CONV)
    assert found[5] == PURGED_SLOT


def test_a_tag_only_row_is_filled_and_keeps_its_tags(repository: RowRepository) -> None:
    tags = {1: SlotPatch(add_deleted_by="bob"), 2: SlotPatch(add_read_by="carol")}
    assert repository.patch(CONV, tags) == 2
    assert repository.set_revoke(CONV, 3, REVOKE)
    collided = repository.insert_new(CONV, messages(1, 3, CONV))
    for seq in collided:  # a repository may fill tag-only rows in insert_new already
        assert repository.read_state(CONV, [seq])[seq].message is None
        assert repository.fill(CONV, message(seq, CONV))
    found = repository.read(CONV, [1, 2, 3])
    assert found[1] == Slot(message(1, CONV), deleted_by=frozenset({"bob"}))
    assert found[2] == Slot(message(2, CONV), read_by=frozenset({"carol"}))
    assert found[3] == Slot(message(3, CONV), REVOKE)


def test_fill_never_lands_on_a_message_or_a_purged_row(repository: RowRepository) -> None:
    assert repository.insert_new(CONV, [message(1, CONV)]) == set()
    assert repository.patch(CONV, {2: SlotPatch(purge=True)}) == 1
    assert not repository.fill(CONV, message(1, CONV, content="x"))
    assert not repository.fill(CONV, message(2, CONV))
    found = repository.read_state(CONV, [1, 2])
    assert found[1].message == message(1, CONV) and found[2] == PURGED_SLOT


def test_revoke_lands_once_and_never_on_a_purged_row(repository: RowRepository) -> None:
    assert repository.insert_new(CONV, [message(1, CONV)]) == set()
    assert repository.patch(CONV, {2: SlotPatch(purge=True)}) == 1
    assert repository.set_revoke(CONV, 1, REVOKE)
    assert not repository.set_revoke(CONV, 1, Revoke("alice", Role.MEMBER))
    assert not repository.set_revoke(CONV, 2, REVOKE)
    assert repository.set_revoke(CONV, 3, REVOKE)  # no row yet: a revoke-only row
    found = repository.read_state(CONV, [1, 2, 3])
    assert (found[1].revoke, found[2], found[3]) == (REVOKE, PURGED_SLOT, Slot(revoke=REVOKE))


def test_patches_are_set_adds_and_a_purge_wipes_the_row(repository: RowRepository) -> None:
    assert repository.insert_new(CONV, messages(1, 2, CONV)) == set()
    both = {s: SlotPatch(add_deleted_by="bob", add_read_by="carol", set_read=True) for s in (1, 2)}
    assert repository.patch(CONV, both) > 0
    repository.patch(CONV, both)
    found = repository.read(CONV, [1, 2])
    assert found[1] == Slot(message(1, CONV), None, frozenset({"bob"}), True, False, {"carol"})
    assert repository.patch(CONV, {1: SlotPatch(purge=True, add_deleted_by="dave")}) == 1
    found = repository.read(CONV, [1, 2])
    assert found[1] == PURGED_SLOT and found[2].deleted_by == {"bob"}
    assert repository.patch(CONV, {}) == 0


def test_scan_pages_every_row_holding_anything_once(repository: RowRepository) -> None:
    assert repository.insert_new(CONV, messages(1, 5, CONV)) == set()
    assert repository.patch(CONV, {9: SlotPatch(add_deleted_by="bob")}) == 1
    seen: list[int] = []
    after: str | None = None
    for _ in range(10):  # bounded: 6 rows in pages of 2
        page = repository.scan(after, 2)
        seen += [s.seq for s in page.slots if s.conversation_id == CONV]
        after = page.cursor
        if after is None:
            break
    assert sorted(seen) == [1, 2, 3, 4, 5, 9]
    assert repository.stats().messages == 5


def _scan_all(repository: RowRepository, limit: int) -> list[tuple[str, int, Slot]]:
    found: list[tuple[str, int, Slot]] = []
    after: str | None = None
    for _ in range(200):  # bounded: every test below stores far fewer rows
        page = repository.scan(after, limit)
        assert len(page.slots) <= limit
        found += [(s.conversation_id, s.seq, s.slot) for s in page.slots]
        after = page.cursor
        if after is None:
            return found
    raise AssertionError("the scan did not end")


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 50])
def test_scan_pages_end_where_every_table_is_complete(
    repository: RowRepository, limit: int
) -> None:
    # Deleter and reader rows fill a page's limit before the message rows do, some keys hold
    # more users than the limit, and tag-only keys sit between messages and after them.
    assert repository.insert_new(CONV, messages(1, 6, CONV)) == set()
    users = [f"user{n}" for n in range(7)]
    for seq in (2, 3):
        for user in users:
            repository.patch(CONV, {seq: SlotPatch(add_deleted_by=user)})
    for user in users[:4]:
        repository.patch(CONV, {4: SlotPatch(add_read_by=user)})
    repository.patch(CONV, {9: SlotPatch(add_deleted_by="bob", add_read_by="carol")})
    repository.patch("sg_rows_z", {1: SlotPatch(add_read_by="carol")})
    found = _scan_all(repository, limit)
    keys = [(conversation_id, seq) for conversation_id, seq, _ in found]
    assert keys == sorted(set(keys))  # each once, in key order
    expected = repository.read(CONV, [1, 2, 3, 4, 5, 6, 9])
    assert {seq: slot for c, seq, slot in found if c == CONV} == expected
    assert expected[2].deleted_by == frozenset(users)
    assert [(c, s) for c, s, _ in found if c != CONV] == [("sg_rows_z", 1)]
