"""Mark-read's read-seq rules without a server: the guard a marked read skips, MongoDB's raise
and the bulk writes it rides on (canned driver replies: counts, not MongoDB semantics)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from pymongo import UpdateOne
from pymongo.errors import BulkWriteError

from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.mark_read_writes import RidingWrites
from imbucket.adapters.mongo.read_marks import MongoReadMarks, raise_needed
from imbucket.adapters.mongo.replies import DUPLICATE_KEY, ReaderMarks
from imbucket.domain.errors import SeqNotAllocated
from imbucket.domain.tags import Guard, checked_beyond


def refusing(empty: list[int]) -> None:
    raise SeqNotAllocated(f"{empty} not allocated")


def test_a_guard_is_asked_only_for_empty_seqs_beyond_the_max_seq_read() -> None:
    checked = checked_beyond(refusing, 10)
    assert checked is not None
    checked([3, 10])  # allocated: max_seq only moves up
    with pytest.raises(SeqNotAllocated, match=r"\[3, 11\]"):
        checked([3, 11])  # the guard sees every empty seq, as it would have
    assert checked_beyond(None, 10) is None


class MarkedStore:
    """A MarkingStore recording what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        self.calls.append(("mark_read", list(seqs)))
        return 0

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        self.calls.append(("mark_read_raising", list(seqs)))
        return len(seqs)


def test_seqs_take_the_raising_mark_read_and_no_seqs_the_plain_one() -> None:
    store = MarkedStore()
    marks = MongoReadMarks(store)  # type: ignore[arg-type]  # a partial MessageStore
    assert marks.mark_read("c", [7, 9], "bob", refusing) == 2
    assert marks.mark_read("c", [], "bob", refusing) == 0
    assert store.calls == [("mark_read_raising", [7, 9]), ("mark_read", [])]


def test_the_read_seq_is_raised_only_when_the_read_found_it_below_the_seqs() -> None:
    users = commands.UserDocs(commands.ROWS)
    rider = raise_needed(users, "c", "bob", [7, 9], ReaderMarks(max_seq=20, read_seq=4))
    assert rider == commands.raise_read_seq(users, "c", "bob", 9)
    assert raise_needed(users, "c", "bob", [7, 9], ReaderMarks(max_seq=20, read_seq=9)) is None


class Collection:
    """A pymongo collection's bulk_write and update_one as canned replies, calls recorded."""

    def __init__(self, details: dict[str, Any], duplicate: bool = False) -> None:
        self.details = details
        self.duplicate = duplicate
        self.sent: list[tuple[str, int]] = []

    def bulk_write(self, operations: list[UpdateOne], ordered: bool) -> Any:
        self.sent.append(("bulk_write", len(operations)))
        if self.duplicate:
            raise BulkWriteError(self.details)
        return SimpleNamespace(bulk_api_result=self.details)

    def update_one(self, filter: Any, update: Any, upsert: bool) -> None:
        self.sent.append(("update_one", 1))


TAGS = commands.Update({"_id": 1}, {"$set": {"is_read": True}})
RIDER = commands.raise_read_seq(commands.UserDocs(commands.ROWS), "c", "bob", 9)


def test_a_rider_goes_with_the_first_write_and_its_match_is_not_the_tags() -> None:
    collection = Collection({"nMatched": 2, "upserted": [], "writeErrors": []})
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    with riding.carrying(RIDER):
        assert riding.bulk_write([TAGS], "write tags").matched == 1  # the rider matched too
        assert not riding.waiting
        riding.bulk_write([TAGS], "write tags")
    assert collection.sent == [("bulk_write", 2), ("bulk_write", 1)]


def test_an_inserted_rider_leaves_the_tags_match_alone() -> None:
    collection = Collection({"nMatched": 1, "upserted": [{"index": 1, "_id": 0}]})
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    with riding.carrying(RIDER):
        assert riding.bulk_write([TAGS], "write tags").matched == 1


def test_a_rider_with_no_write_to_carry_it_goes_alone() -> None:
    collection = Collection({})
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    with riding.carrying(RIDER):
        pass
    with riding.carrying(None):
        pass
    assert collection.sent == [("update_one", 1)]


def test_a_rider_lost_to_a_concurrent_first_upsert_is_sent_again() -> None:
    duplicate = {"code": DUPLICATE_KEY, "index": 1, "errmsg": "E11000"}
    collection = Collection({"nMatched": 1, "writeErrors": [duplicate]}, duplicate=True)
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    with riding.carrying(RIDER):
        outcome = riding.bulk_write([TAGS], "write tags")
        assert (outcome.matched, outcome.collided) == (1, [])
        assert riding.waiting
    assert collection.sent == [("bulk_write", 2), ("update_one", 1)]


def test_a_block_that_raises_drops_the_rider() -> None:
    collection = Collection({})
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    with pytest.raises(SeqNotAllocated), riding.carrying(RIDER):
        refusing([21])
    assert collection.sent == []
    assert not riding.waiting


def test_a_rider_waits_in_its_own_thread() -> None:
    collection = Collection({"nMatched": 1, "upserted": [], "writeErrors": []})
    riding = RidingWrites(collection)  # type: ignore[arg-type]
    seen: list[bool] = []
    with riding.carrying(RIDER):
        other = threading.Thread(target=lambda: seen.append(riding.waiting))
        other.start()
        other.join()
        assert riding.waiting
    assert seen == [False]
    assert collection.sent == [("update_one", 1)]
