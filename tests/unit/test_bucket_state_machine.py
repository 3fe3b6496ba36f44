"""BucketMessageStore's state machine, driven through a repository that records and races."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imbucket.adapters.bucket import BucketMessageStore, FirstWrite
from imbucket.adapters.memory import MemoryBucketRepository
from imbucket.domain.budget import TagBudget
from imbucket.domain.model import OTHER_DELETERS, Message, Revoke, Role, Slot, SlotPatch
from imbucket.ports.bucket_repository import Spilled, Viewed
from imbucket.testing.factories import CONV, message, messages


class RecordingRepository(MemoryBucketRepository):
    """Memory repository that logs each primitive (one call = one round trip) and can let a
    rival writer create a bucket right before our own create_bucket runs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.rival: dict[str, dict[int, Slot]] = {}
        self.rival_patch: tuple[str, dict[int, SlotPatch]] | None = None
        # Answer a partly refused patch_many with None, as MariaDB and MongoDB may.
        self.unknown_outcome = False

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        self.calls.append("write")
        return super().write_messages(doc_id, messages)

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        self.calls.append("create")
        rival = self.rival.pop(doc_id, None)
        if rival is not None:
            super().create_bucket(doc_id, rival)
        return super().create_bucket(doc_id, slots)

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        self.calls.append("read")
        return super().read(wanted)

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        self.calls.append("revoke")
        return super().set_revoke(doc_id, slot, revoke)

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        self.calls.append("patch")
        if self.rival_patch is not None:  # another writer's patch lands just before ours
            rival, self.rival_patch = self.rival_patch, None
            super().patch(*rival)
        return super().patch(doc_id, patches, budget)

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        self.calls.append("patch many")
        written = {
            d for d, p in patches.items() if MemoryBucketRepository.patch(self, d, p, budget)
        }
        MemoryBucketRepository.add_spilled(self, [e for e in spills if e[0] in written])
        return None if self.unknown_outcome and len(written) < len(patches) else written

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        self.calls.append("create")
        for doc_id in [d for d in self.rival if d in buckets]:
            MemoryBucketRepository.create_bucket(self, doc_id, self.rival.pop(doc_id))
        return {d for d, s in buckets.items() if MemoryBucketRepository.create_bucket(self, d, s)}

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        self.calls.append("spill")
        return super().add_spilled(entries)

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        self.calls.append("read")
        return super().read_viewed(wanted, viewer)

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        self.calls.append("read spilled")
        return super().read_spilled(wanted, viewer)

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        self.calls.append("drop spilled")
        super().drop_spilled(wanted)


def make(budget: TagBudget | None = None) -> tuple[BucketMessageStore, RecordingRepository]:
    repository = RecordingRepository()
    return BucketMessageStore(repository, budget), repository


def test_first_insert_builds_the_whole_bucket() -> None:
    store, repository = make()
    assert store.insert(CONV, messages(1, 10)).inserted == tuple(range(1, 11))
    assert repository.calls == ["write", "read", "create"]
    bucket = repository.read({f"{CONV}:0": list(range(100))})[f"{CONV}:0"]
    assert len(bucket) == 100
    assert sum(slot.message is not None for slot in bucket.values()) == 10


def test_insert_into_existing_bucket_is_one_conditional_write() -> None:
    store, repository = make()
    store.insert(CONV, messages(1, 1))
    repository.calls.clear()
    store.insert(CONV, messages(2, 100))
    assert repository.calls == ["write"]


def test_lost_creation_race_steps_back_and_retries_as_update() -> None:
    store, repository = make()
    repository.rival[f"{CONV}:0"] = {
        0: Slot(message=message(1)),
        1: Slot(revoke=Revoke("o", Role.OWNER)),
    }
    result = store.insert(CONV, messages(1, 3))
    assert result.duplicates == (1,)
    assert result.inserted == (2, 3)
    assert repository.calls == ["write", "read", "create", "write", "read", "write"]
    slots = store.get(CONV, [2])
    assert slots[2].message == message(2) and slots[2].revoke is not None


def test_lost_race_with_a_different_message_is_a_conflict() -> None:
    store, repository = make()
    repository.rival[f"{CONV}:0"] = {0: Slot(message=message(1, content="theirs"))}
    result = store.insert(CONV, messages(1, 2))
    assert result.conflicts == (1,)
    assert result.inserted == (2,)
    assert store.get(CONV, [1])[1].message == message(1, content="theirs")


def test_batch_over_two_buckets_writes_each_once() -> None:
    store, repository = make()
    store.insert(CONV, [message(1), message(200)])
    repository.calls.clear()
    store.insert(CONV, messages(51, 150))
    assert repository.calls == ["write", "write"]


def test_get_is_one_read_for_many_buckets() -> None:
    store, repository = make()
    store.insert(CONV, messages(1, 300))
    repository.calls.clear()
    assert len(store.get(CONV, [1, 150, 299, 301])) == 3
    assert repository.calls == ["read"]


def test_tag_on_missing_bucket_creates_it_with_every_slot() -> None:
    store, repository = make()
    assert store.delete_for(CONV, [150], "bob") == 1
    assert repository.calls == ["read", "create"]  # the read found no bucket
    assert store.get(CONV, [150])[150].deleted_by == {"bob"}
    assert len(repository.read({f"{CONV}:1": list(range(100))})[f"{CONV}:1"]) == 100


def test_tag_creation_race_falls_back_to_patch() -> None:
    store, repository = make()
    repository.rival[f"{CONV}:0"] = {4: Slot(deleted_by=frozenset({"carol"}))}
    store.delete_for(CONV, [5], "bob")
    assert store.get(CONV, [5])[5].deleted_by == {"bob", "carol"}


def test_revoke_on_missing_bucket_creates_it() -> None:
    store, repository = make()
    revoke = Revoke("o", Role.OWNER)
    assert store.revoke(CONV, 7, revoke) is True
    assert repository.calls == ["revoke", "read", "create"]
    assert store.revoke(CONV, 7, revoke) is False
    store.insert(CONV, [message(7)])
    assert store.get(CONV, [7])[7] == Slot(message=message(7), revoke=revoke)


def test_delete_for_many_seqs_is_one_read_and_one_patch_for_all_buckets() -> None:
    store, repository = make()
    store.insert(CONV, messages(1, 200))
    repository.calls.clear()
    assert store.delete_for(CONV, list(range(1, 201)), "bob") == 200
    assert repository.calls == ["read", "patch many"]


def test_a_tag_write_over_stored_and_missing_buckets_patches_and_creates_once_each() -> None:
    store, repository = make()
    store.insert(CONV, messages(1, 200))
    repository.calls.clear()
    assert store.mark_read(CONV, [5, 150, 250, 350], "bob") == 4
    assert repository.calls == ["read", "patch many", "create"]
    assert store.get(CONV, [350])[350].read_by == {"bob"}


def test_an_outcome_the_engine_cannot_tell_is_read_again_and_counted_once() -> None:
    store, repository = make(TagBudget(deleters_per_slot=5, deleters_per_bucket=1))
    repository.unknown_outcome = True
    store.insert(CONV, messages(1, 300))
    deleters(store, 120, "a")  # bucket 1 is full: bob's delete there is refused, then spills
    repository.calls.clear()
    assert store.delete_for(CONV, [5, 150, 250], "bob") == 3
    # buckets 0 and 2 landed (the reread shows it), bucket 1 is tried alone, then spills
    assert repository.calls == ["read", "patch many", "read", "patch", "read", "patch", "spill"]
    assert all(s.deleted_by >= {"bob"} for s in store.get(CONV, [5, 150, 250]).values())
    assert store.delete_for(CONV, [5, 150, 250], "bob") == 0


def test_stats_of_memory_buckets() -> None:
    store, _ = make()
    store.insert(CONV, messages(1, 101))
    stats = store.stats()
    assert (stats.messages, stats.documents) == (101, 2)
    assert stats.data_bytes > stats.index_bytes > 0


# ---- bounded buckets -----------------------------------------------------------------------

DOC = f"{CONV}:0"


def deleters(store: BucketMessageStore, seq: int, *users: str) -> list[int]:
    return [store.delete_for(CONV, [seq], user) for user in users]


def test_deleters_beyond_the_slot_cap_spill_and_flag_the_slot_once() -> None:
    store, repository = make(TagBudget(deleters_per_slot=2, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 3))
    assert deleters(store, 2, "a", "b") == [1, 1]
    repository.calls.clear()
    assert deleters(store, 2, "c") == [1]
    assert repository.calls == ["read", "patch many"]  # the flag and the side table at once
    repository.calls.clear()
    assert deleters(store, 2, "d", "c", "a") == [1, 0, 0]
    assert repository.calls == ["read", "spill"] * 2 + ["read"]
    inline = repository.read({DOC: [1]})[DOC][1]
    assert (inline.deleted_by, inline.spilled) == ({"a", "b"}, True)
    assert repository.read_spilled({DOC: [1]}) == {DOC: {1: {"c", "d"}}}


def test_a_spill_riding_on_a_patch_the_engine_cannot_confirm_is_counted_once() -> None:
    """Bucket 0 refuses bob (its budget is full), bucket 1 flags his slot and takes his
    entry with that patch. Told which landed, or only "not all" (then both are read again,
    and bucket 1's entry counts once, its slot being flagged now): bob spills in both."""
    for unknown in (False, True):
        store, repository = make(TagBudget(deleters_per_slot=1, deleters_per_bucket=1))
        repository.unknown_outcome = unknown
        store.insert(CONV, messages(1, 200))
        deleters(store, 1, "a")  # bucket 0 holds its one deleter
        deleters(store, 150, "a")  # slot 49 of bucket 1 is at its cap
        repository.calls.clear()
        assert store.delete_for(CONV, [5, 150], "bob") == 2, unknown
        # bucket 0 alone (tried inline again when its outcome was unknown), then its spill
        tried = ["patch", "read"] if unknown else []
        assert repository.calls == ["read", "patch many", "read", *tried, "patch", "spill"]
        assert repository.read_spilled({DOC: [4], f"{CONV}:1": [49]}) == {
            DOC: {4: {"bob"}},
            f"{CONV}:1": {49: {"bob"}},
        }
        assert store.delete_for(CONV, [5, 150], "bob") == 0


def test_a_read_costs_one_more_round_trip_only_with_a_spilled_slot() -> None:
    store, repository = make(TagBudget(deleters_per_slot=1, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 150))
    deleters(store, 2, "a", "b")
    deleters(store, 120, "a")
    repository.calls.clear()
    assert store.get(CONV, [1, 120, 3])[120].deleted_by == {"a"}
    assert repository.calls == ["read"]
    repository.calls.clear()
    slots = store.get(CONV, [1, 2, 120])
    assert repository.calls == ["read", "read spilled"]
    assert slots[2] == Slot(message=message(2), deleted_by=frozenset({"a", "b"}))


def test_a_viewer_found_inline_needs_no_side_table_lookup() -> None:
    store, repository = make(TagBudget(deleters_per_slot=1, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 3))
    deleters(store, 2, "a", "b")  # a inline, b spilled: the slot is flagged
    repository.calls.clear()
    assert store.get(CONV, [2], "a")[2].deleted_by == {"a"}
    assert repository.calls == ["read"]
    for viewer, seen in (("b", {"b"}), ("c", {OTHER_DELETERS})):
        repository.calls.clear()
        assert store.get(CONV, [2], viewer)[2].deleted_by == seen
        assert repository.calls == ["read", "read spilled"]


def test_the_bucket_budget_spills_deleters_of_slots_that_are_not_full() -> None:
    store, repository = make(TagBudget(deleters_per_slot=5, deleters_per_bucket=3))
    store.insert(CONV, messages(1, 10))
    assert [store.delete_for(CONV, [seq], "a") for seq in (1, 2, 3, 4, 5)] == [1] * 5
    inline = repository.read({DOC: [0, 1, 2, 3, 4]})[DOC]
    assert sum(len(slot.deleted_by) for slot in inline.values()) == 3
    assert [slot.spilled for slot in inline.values()] == [False] * 3 + [True] * 2
    assert all(entry.deleted_by == {"a"} for entry in store.get(CONV, [1, 2, 3, 4, 5]).values())


def test_a_refused_patch_is_read_again_and_spills() -> None:
    store, repository = make(TagBudget(deleters_per_slot=2, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 3))
    deleters(store, 2, "a")
    repository.calls.clear()
    repository.rival_patch = (DOC, {1: SlotPatch(add_deleted_by="rival")})
    assert deleters(store, 2, "b") == [1]
    assert repository.calls == ["read", "patch", "read", "patch", "spill"]
    assert store.get(CONV, [2])[2].deleted_by == {"a", "rival", "b"}
    assert len(repository.read({DOC: [1]})[DOC][1].deleted_by) == 2


def test_a_new_bucket_is_created_within_the_budget() -> None:
    store, repository = make(TagBudget(deleters_per_slot=5, deleters_per_bucket=2))
    assert store.delete_for(CONV, [1, 2, 3], "a") == 3
    assert repository.calls == ["read", "create", "spill"]
    inline = repository.read({DOC: [0, 1, 2]})[DOC]
    assert [len(slot.deleted_by) for slot in inline.values()] == [1, 1, 0]
    assert inline[2].spilled
    assert all(slot.deleted_by == {"a"} for slot in store.get(CONV, [1, 2, 3]).values())


def test_purge_drops_spilled_deleters_and_stays_final() -> None:
    store, repository = make(TagBudget(deleters_per_slot=1, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 3))
    deleters(store, 2, "a", "b", "c")
    repository.calls.clear()
    assert store.purge(CONV, [1]) == 1
    assert repository.calls == ["read", "patch"]  # nothing spilled: no side-table call
    repository.calls.clear()
    assert store.purge(CONV, [2]) == 1
    assert repository.calls == ["read", "patch", "drop spilled"]
    assert repository.read_spilled({DOC: [1]}) == {}
    assert store.get(CONV, [2])[2] == Slot(purged=True)
    assert deleters(store, 2, "d") == [0]
    assert store.insert(CONV, [message(2)]).purged == (2,)


def test_a_purged_slot_never_shows_deleters_spilled_after_its_purge() -> None:
    store, repository = make(TagBudget(deleters_per_slot=1, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 1))
    store.purge(CONV, [1])
    repository.add_spilled([(DOC, 0, "late")])  # a concurrent delete that read before
    repository.patch(DOC, {0: SlotPatch(mark_spilled=True)})
    assert store.get(CONV, [1])[1] == Slot(purged=True)


def test_early_readers_stop_at_two() -> None:
    store, repository = make()
    assert [store.mark_read(CONV, [1], reader) for reader in ("a", "b", "c")] == [1, 1, 0]
    assert store.get(CONV, [1])[1].read_by == {"a", "b"}
    store.mark_read(CONV, [3], "r1")
    repository.rival_patch = (DOC, {2: SlotPatch(add_read_by="r2")})
    calls = len(repository.calls)
    assert store.mark_read(CONV, [3], "r3") == 0  # refused, read again: two are enough
    assert repository.calls[calls:] == ["read", "patch", "read"]
    assert store.get(CONV, [3])[3].read_by == {"r1", "r2"}


def test_delete_for_reads_no_deleter_list() -> None:
    store, repository = make(TagBudget(deleters_per_slot=20, deleters_per_bucket=50))
    store.insert(CONV, messages(1, 3))
    shipped: list[int] = []
    viewed = repository.read_viewed

    def counting(wanted: Mapping[str, Sequence[int]], viewer: str) -> dict[str, dict[int, Viewed]]:
        found = viewed(wanted, viewer)
        shipped.extend(len(s.deleted_by) for b in found.values() for s, _ in b.values())
        return found

    def refused(wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        raise AssertionError("delete_for read whole deleter lists")

    repository.read_viewed = counting  # type: ignore[method-assign]
    repository.read = refused  # type: ignore[method-assign]
    repository.calls.clear()
    users = [f"u{n}" for n in range(30)]  # 20 inline, then 10 spill
    assert deleters(store, 2, *users, "u0", "u29") == [1] * 30 + [0, 0]
    assert "read" in repository.calls and max(shipped) == 1  # {user}, {""} or {}
    del repository.read  # the full read again, for the checks below
    assert store.get(CONV, [2])[2].deleted_by == set(users)
    assert store.get(CONV, [2], "u29")[2].deleted_by == {"u29"}
    assert store.get(CONV, [2], "u0")[2].deleted_by == {"u0"}
    assert store.get(CONV, [2], "bystander")[2].deleted_by == {""}
    assert store.get(CONV, [1], "u0")[1].deleted_by == frozenset()


class CreatingFirst(BucketMessageStore):
    """A store whose first write creates every bucket (as an engine might in one trip)."""

    def _first_writes(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        done: dict[str, FirstWrite] = {}
        for doc_id, pending in buckets.items():
            slots = {index: Slot(message=m) for index, m in pending.items()}
            created = self.repository.create_bucket(doc_id, slots)
            done[doc_id] = FirstWrite.WRITTEN if created else FirstWrite.EXISTS
        return done


class FillingFirst(BucketMessageStore):
    """A store whose first write fills every bucket, reporting a miss as such."""

    def _first_writes(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        return {
            doc_id: FirstWrite.WRITTEN
            if self.repository.write_messages(doc_id, pending)
            else FirstWrite.MISSED
            for doc_id, pending in buckets.items()
        }


def test_a_refused_first_create_fills_next_and_a_refused_fill_reads() -> None:
    repository = RecordingRepository()
    store = CreatingFirst(repository)
    store.insert(CONV, [message(1, content="another")])
    repository.calls.clear()
    result = store.insert(CONV, messages(1, 150))
    assert (result.conflicts, result.inserted) == ((1,), tuple(range(2, 151)))
    # Bucket 0 is there: its fill next, refused, then the read, then the fill of the rest;
    # bucket 1 was created by the first write.
    assert repository.calls == ["create", "create", "write", "read", "write"]


def test_a_missed_first_fill_reads_next_and_creates_a_missing_bucket() -> None:
    repository = RecordingRepository()
    store = FillingFirst(repository)
    store.insert(CONV, messages(1, 50))
    repository.calls.clear()
    assert store.insert(CONV, messages(51, 150)).inserted == tuple(range(51, 151))
    # Bucket 1 is missing: the first write misses it, the read says so, the create follows.
    assert repository.calls == ["write", "write", "read", "create"]
