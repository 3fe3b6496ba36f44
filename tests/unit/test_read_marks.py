"""Mark-read's read-seq rules without a server: the guard a marked read skips, MongoDB's raise."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from adapters.memory import MemorySeqStore
from adapters.mongo.read_marks import MongoReadMarks
from adapters.mongo.replies import ReaderMarks
from domain.errors import SeqNotAllocated
from domain.tags import Guard, checked_beyond


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
    """A MarkingStore whose read finds the given marks; records what it was asked."""

    def __init__(self, marks: ReaderMarks) -> None:
        self.marks = marks
        self.calls: list[tuple[str, list[int]]] = []

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        self.calls.append(("mark_read", list(seqs)))
        return 0

    def mark_read_marked(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> tuple[int, ReaderMarks]:
        self.calls.append(("mark_read_marked", list(seqs)))
        checked = checked_beyond(guard, self.marks.max_seq)
        if checked is not None:
            checked([s for s in seqs if s > self.marks.max_seq])
        return len(seqs), self.marks


def marks_over(store: MarkedStore, seqs: MemorySeqStore) -> MongoReadMarks:
    return MongoReadMarks(store, seqs)  # type: ignore[arg-type]  # a partial MessageStore


def test_the_read_seq_is_raised_when_the_read_found_it_below_the_seqs() -> None:
    seqs = MemorySeqStore()
    store = MarkedStore(ReaderMarks(max_seq=20, read_seq=4))
    assert marks_over(store, seqs).mark_read("c", [7, 9], "bob", refusing) == 2
    assert seqs.read_seq("c", "bob") == 9


def test_a_read_seq_covering_the_seqs_is_left_alone() -> None:
    seqs = MemorySeqStore()
    seqs.raise_read_seq("c", "bob", 3)  # the seq store holds less than the read found:
    store = MarkedStore(ReaderMarks(max_seq=20, read_seq=9))  # no raise is sent at all
    assert marks_over(store, seqs).mark_read("c", [7, 9], "bob", refusing) == 2
    assert seqs.read_seq("c", "bob") == 3


def test_a_refused_write_raises_nothing() -> None:
    seqs = MemorySeqStore()
    store = MarkedStore(ReaderMarks(max_seq=8, read_seq=0))
    with pytest.raises(SeqNotAllocated):
        marks_over(store, seqs).mark_read("c", [7, 9], "bob", refusing)
    assert seqs.read_seq("c", "bob") == 0


def test_no_seqs_take_the_plain_mark_read_and_raise_nothing() -> None:
    seqs = MemorySeqStore()
    store = MarkedStore(ReaderMarks())
    assert marks_over(store, seqs).mark_read("c", [], "bob", refusing) == 0
    assert store.calls == [("mark_read", [])]
    assert seqs.read_seq("c", "bob") == 0
