"""The BucketRepository primitives the bucket state machine relies on, on every bucket backend."""

from __future__ import annotations

from dataclasses import replace

import pytest

from imbucket.domain.budget import TagBudget
from imbucket.domain.model import PURGED_SLOT, Revoke, Role, Slot, SlotPatch
from imbucket.ports.bucket_repository import BucketRepository
from imbucket.ports.message_store import MessageStore
from imbucket.testing.factories import message
from imbucket.testing.rows import BUCKETS, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(BUCKETS), indirect=True)

CONV = "sg_repo"
DOC = f"{CONV}:0"
REVOKE = Revoke("olivia", Role.OWNER, "Olivia", 1_700_000_000_000)


@pytest.fixture
def repository(store: MessageStore) -> BucketRepository:
    repo: BucketRepository = store.repository  # type: ignore[attr-defined]
    return repo


def test_a_bucket_holds_exactly_size_slots(repository: BucketRepository) -> None:
    assert repository.create_bucket(DOC, {3: Slot(message=message(4, CONV))})
    size = repository.layout.size
    slots = repository.read({DOC: list(range(size))})[DOC]
    assert len(slots) == size
    assert [i for i, slot in slots.items() if not slot.is_empty] == [3]


def test_create_reports_an_existing_bucket(repository: BucketRepository) -> None:
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV))})
    assert not repository.create_bucket(DOC, {0: Slot(message=message(1, CONV, content="x"))})
    assert repository.read({DOC: [0]})[DOC][0].message == message(1, CONV)


def test_write_lands_only_on_free_slots_of_an_existing_bucket(
    repository: BucketRepository,
) -> None:
    assert not repository.write_messages(DOC, {0: message(1, CONV)})
    assert repository.create_bucket(DOC, {1: Slot(message=message(2, CONV)), 2: PURGED_SLOT})
    for occupied in (1, 2):  # all or nothing: slot 0 stays empty as well
        assert not repository.write_messages(DOC, {0: message(1, CONV), occupied: message(9, CONV)})
        assert repository.read({DOC: [0]})[DOC][0].is_empty
    assert repository.write_messages(DOC, {0: message(1, CONV), 3: message(4, CONV)})
    slots = repository.read({DOC: [0, 1, 2, 3]})[DOC]
    assert [slots[i].message for i in (0, 1, 3)] == [message(s, CONV) for s in (1, 2, 4)]
    assert slots[2] == PURGED_SLOT


def test_write_keeps_tags_already_on_the_slot(repository: BucketRepository) -> None:
    early = Slot(revoke=REVOKE, deleted_by=frozenset({"bob"}), read_by=frozenset({"carol"}))
    assert repository.create_bucket(DOC, {0: early})
    assert repository.write_messages(DOC, {0: message(1, CONV)})
    slot = repository.read({DOC: [0]})[DOC][0]
    assert slot == Slot(message(1, CONV), REVOKE, frozenset({"bob"}), False, False, early.read_by)


def test_read_many_buckets_skips_missing_ones(repository: BucketRepository) -> None:
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV))})
    second = f"{CONV}:2"
    assert repository.create_bucket(second, {5: Slot(message=message(206, CONV))})
    found = repository.read({DOC: [0, 1], f"{CONV}:1": [0], second: [5]})
    assert set(found) == {DOC, second}
    assert found[second][5].message == message(206, CONV)
    assert found[DOC][1].is_empty


def test_patches_are_set_adds_and_spare_purged_slots(repository: BucketRepository) -> None:
    assert not repository.patch(DOC, {0: SlotPatch(add_deleted_by="bob")})
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV)), 1: PURGED_SLOT})
    both = {
        0: SlotPatch(add_deleted_by="bob", add_read_by="carol", set_read=True),
        1: SlotPatch(add_deleted_by="bob", add_read_by="carol", set_read=True),
    }
    for _ in range(2):
        assert repository.patch(DOC, both)
    slots = repository.read({DOC: [0, 1]})[DOC]
    assert slots[0] == Slot(message(1, CONV), None, frozenset({"bob"}), True, False, {"carol"})
    assert slots[1] == PURGED_SLOT
    assert repository.patch(DOC, {0: SlotPatch(add_deleted_by="dave")})
    assert repository.read({DOC: [0]})[DOC][0].deleted_by == {"bob", "dave"}
    assert repository.patch(DOC, {0: SlotPatch(purge=True)})
    assert repository.read({DOC: [0]})[DOC][0] == PURGED_SLOT


def test_revoke_lands_once_and_never_on_a_purged_slot(repository: BucketRepository) -> None:
    assert not repository.set_revoke(DOC, 0, REVOKE)
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV)), 1: PURGED_SLOT})
    assert repository.set_revoke(DOC, 0, REVOKE)
    assert not repository.set_revoke(DOC, 0, Revoke("alice", Role.MEMBER))
    assert not repository.set_revoke(DOC, 1, REVOKE)
    slots = repository.read({DOC: [0, 1]})[DOC]
    assert slots[0].revoke == REVOKE and slots[1] == PURGED_SLOT


def test_many_slots_change_in_one_write(repository: BucketRepository) -> None:
    indexes = range(min(30, repository.layout.size))
    assert repository.create_bucket(DOC, {indexes[-1]: PURGED_SLOT})
    free = list(indexes)[:-1]
    assert repository.write_messages(DOC, {i: message(i + 1, CONV) for i in free})
    patches = {i: SlotPatch(add_deleted_by="bob") for i in indexes}
    patches[0] = SlotPatch(purge=True)
    assert repository.patch(DOC, patches)
    slots = repository.read({DOC: list(indexes)})[DOC]
    assert slots[0] == slots[indexes[-1]] == PURGED_SLOT
    assert all(slots[i].deleted_by == {"bob"} for i in free[1:])
    assert [slots[i].message for i in free[1:]] == [message(i + 1, CONV) for i in free[1:]]


def test_a_budget_refuses_a_deleter_or_reader_beyond_a_full_slot(
    repository: BucketRepository,
) -> None:
    budget = TagBudget(deleters_per_slot=2, deleters_per_bucket=10, readers_per_slot=2)
    assert not repository.patch(DOC, {0: SlotPatch(add_deleted_by="bob")}, budget)  # no bucket
    full = Slot(deleted_by=frozenset({"bob", "carol"}), read_by=frozenset({"dave", "erin"}))
    assert repository.create_bucket(DOC, {0: full, 1: Slot(message=message(2, CONV))})
    for refused in (SlotPatch(add_deleted_by="frank"), SlotPatch(add_read_by="frank")):
        # All or nothing: the free slot 1 is not written either.
        assert not repository.patch(DOC, {0: refused, 1: SlotPatch(set_read=True)}, budget)
    assert repository.read({DOC: [0, 1]})[DOC] == {0: full, 1: Slot(message=message(2, CONV))}
    unbounded = [SlotPatch(set_read=True), SlotPatch(mark_spilled=True), SlotPatch(purge=True)]
    for patch in unbounded:
        assert repository.patch(DOC, {0: patch}, budget)
    assert repository.patch(DOC, {1: SlotPatch(add_deleted_by="bob")}, budget)
    assert repository.patch(DOC, {0: SlotPatch(add_deleted_by="bob")})  # no budget: no check


def test_a_budget_counts_the_deleters_of_the_whole_bucket(repository: BucketRepository) -> None:
    budget = TagBudget(deleters_per_slot=5, deleters_per_bucket=4)
    two = Slot(message=message(1, CONV), deleted_by=frozenset({"bob", "carol"}))
    assert repository.create_bucket(DOC, {0: two, 7: PURGED_SLOT})
    adds = {i: SlotPatch(add_deleted_by="dave") for i in (3, 5, 9)}
    assert not repository.patch(DOC, adds, budget)  # 2 + 3 > 4
    assert repository.patch(DOC, {3: adds[3], 5: adds[5]}, budget)  # 2 + 2 <= 4
    assert not repository.patch(DOC, {9: adds[9]}, budget)
    slots = repository.read({DOC: [3, 5, 9]})[DOC]
    assert [slots[i].deleted_by for i in (3, 5, 9)] == [{"dave"}, {"dave"}, frozenset()]


def test_patch_many_writes_each_bucket_as_patch_would(repository: BucketRepository) -> None:
    """Several buckets in one write; each lands or is refused on its own, as ``patch``."""
    budget = TagBudget(deleters_per_slot=2, deleters_per_bucket=10)
    size = repository.layout.size
    docs = [f"{CONV}:{n}" for n in range(3)]

    def stored(n: int, index: int) -> Slot:  # the message of slot index of bucket n
        return Slot(message=message(n * size + index + 1, CONV))

    def full(n: int) -> Slot:
        return replace(stored(n, 0), deleted_by=frozenset({"bob", "carol"}))

    for n, doc_id in enumerate(docs):
        assert repository.create_bucket(doc_id, {0: full(n), 1: stored(n, 1)})
    patches = {
        docs[0]: {1: SlotPatch(add_deleted_by="dave"), 2: SlotPatch(purge=True)},
        docs[1]: {0: SlotPatch(add_deleted_by="dave")},  # slot 0 is full: refused
        docs[2]: {1: SlotPatch(set_read=True), 3: SlotPatch(add_read_by="erin")},
        f"{CONV}:9": {0: SlotPatch(set_read=True)},  # no such bucket: refused
    }
    written = repository.patch_many(patches, budget)
    # Engines that report only a count (MariaDB, MongoDB) may not say which landed.
    assert written in ({docs[0], docs[2]}, None)
    slots = repository.read({doc_id: [0, 1, 2, 3] for doc_id in docs})
    assert slots[docs[0]][1].deleted_by == {"dave"} and slots[docs[0]][2] == PURGED_SLOT
    assert slots[docs[1]][0] == full(1) and slots[docs[1]][1] == stored(1, 1)
    assert slots[docs[2]][1].read and slots[docs[2]][3].read_by == {"erin"}
    assert f"{CONV}:9" not in repository.read({f"{CONV}:9": [0]})
    landed = {docs[0]: patches[docs[0]], docs[2]: patches[docs[2]]}
    assert repository.patch_many(landed, budget) == set(landed)  # set-adds: again, all land


def test_the_spilled_flag_is_set_by_a_patch_and_spares_purged_slots(
    repository: BucketRepository,
) -> None:
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV)), 1: PURGED_SLOT})
    marks = {i: SlotPatch(mark_spilled=True) for i in (0, 1, 2)}
    assert repository.patch(DOC, marks)
    slots = repository.read({DOC: [0, 1, 2]})[DOC]
    assert slots[0] == Slot(message=message(1, CONV), spilled=True)
    assert slots[1] == PURGED_SLOT
    assert slots[2] == Slot(spilled=True)
    assert repository.create_bucket(f"{CONV}:1", {4: Slot(deleted_by=frozenset("a"), spilled=True)})
    assert repository.read({f"{CONV}:1": [4]})[f"{CONV}:1"][4].spilled


def test_spills_ride_on_patch_many_only_into_the_buckets_written(
    repository: BucketRepository,
) -> None:
    """The side-table entries of a bucket go with its patch, and only if it lands (one
    bucket, or several of which one is refused); entries there already stay one each."""
    budget = TagBudget(deleters_per_slot=1, deleters_per_bucket=10)
    docs = [f"{CONV}:{n}" for n in range(3)]
    held = Slot(deleted_by=frozenset({"bob"}))
    for doc_id in docs:
        assert repository.create_bucket(doc_id, {0: held})
    flag = {0: SlotPatch(mark_spilled=True)}
    assert repository.patch_many({docs[0]: flag}, budget, [(docs[0], 0, "carol")]) == {docs[0]}
    patches = {
        docs[1]: flag,
        docs[2]: {0: SlotPatch(add_deleted_by="dave")},  # slot 0 is full: refused
        f"{CONV}:9": flag,  # no such bucket: refused
    }
    spills = [(docs[1], 0, "carol"), (docs[1], 0, "dave"), (docs[2], 0, "erin")]
    spills += [(f"{CONV}:9", 0, "carol")]
    assert repository.patch_many(patches, budget, spills) in ({docs[1]}, None)
    assert repository.patch_many({docs[0]: flag}, budget, [(docs[0], 0, "carol")]) == {docs[0]}
    wanted = {doc_id: [0] for doc_id in [*docs, f"{CONV}:9"]}
    assert repository.read_spilled(wanted) == {
        docs[0]: {0: {"carol"}},
        docs[1]: {0: {"carol", "dave"}},
    }
    slots = repository.read({doc_id: [0] for doc_id in docs})
    assert [slots[doc_id][0].spilled for doc_id in docs] == [True, True, False]
    assert all(slots[doc_id][0].deleted_by == {"bob"} for doc_id in docs)


def test_spilled_deleters_are_a_set_per_slot(repository: BucketRepository) -> None:
    other = f"{CONV}:1"
    entries = [(DOC, 3, "bob"), (DOC, 3, "carol"), (DOC, 4, "bob"), (other, 0, "bob")]
    assert repository.add_spilled(entries) == 4
    assert repository.add_spilled(entries) == 0
    assert repository.add_spilled([(DOC, 3, "bob"), (DOC, 3, "dave")]) == 1
    found = repository.read_spilled({DOC: [3, 4, 5], other: [0], f"{CONV}:2": [3]})
    assert found == {DOC: {3: {"bob", "carol", "dave"}, 4: {"bob"}}, other: {0: {"bob"}}}
    repository.drop_spilled({DOC: [3], other: [1]})
    assert repository.read_spilled({DOC: [3, 4], other: [0]}) == {
        DOC: {4: {"bob"}},
        other: {0: {"bob"}},
    }


def test_bucket_bytes_measure_the_stored_bucket(repository: BucketRepository) -> None:
    assert repository.bucket_bytes(DOC) is None
    assert repository.create_bucket(DOC, {0: Slot(message=message(1, CONV))})
    # MariaDB's JSON functions write a space after each colon and comma: measure after one.
    assert repository.patch(DOC, {0: SlotPatch(add_deleted_by="bob")})
    before = repository.bucket_bytes(DOC)
    assert before is not None and before > repository.layout.size * len("{}")  # every slot
    assert repository.patch(DOC, {0: SlotPatch(add_deleted_by="x" * 1000)})
    after = repository.bucket_bytes(DOC)
    assert after is not None and 1000 <= after - before <= 1000 + 16
