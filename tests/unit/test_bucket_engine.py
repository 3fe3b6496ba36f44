"""BucketMessageStore's state machine, driven through a repository that records and races."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.bucket import BucketMessageStore
from adapters.memory import MemoryBucketRepository
from domain.model import Message, Revoke, Role, Slot, SlotPatch
from tests.factories import CONV, message, messages


class RecordingRepository(MemoryBucketRepository):
    """Memory repository that logs each primitive (one call = one round trip) and can let a
    rival writer create a bucket right before our own create_bucket runs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.rival: dict[str, dict[int, Slot]] = {}

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

    def patch(self, doc_id: str, patches: Mapping[int, SlotPatch]) -> bool:
        self.calls.append("patch")
        return super().patch(doc_id, patches)


def make() -> tuple[BucketMessageStore, RecordingRepository]:
    repository = RecordingRepository()
    return BucketMessageStore(repository), repository


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
    assert repository.calls == ["read", "patch", "create"]
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


def test_delete_for_many_seqs_is_one_read_and_one_patch_per_bucket() -> None:
    store, repository = make()
    store.insert(CONV, messages(1, 200))
    repository.calls.clear()
    assert store.delete_for(CONV, list(range(1, 201)), "bob") == 200
    assert repository.calls == ["read", "patch", "patch"]


def test_stats_of_memory_buckets() -> None:
    store, _ = make()
    store.insert(CONV, messages(1, 101))
    stats = store.stats()
    assert (stats.messages, stats.documents) == (101, 2)
    assert stats.data_bytes > stats.index_bytes > 0
