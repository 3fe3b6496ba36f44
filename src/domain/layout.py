"""Bucket addressing: which document and which slot hold a seq."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from imbucket.domain.errors import InvalidArgument, InvalidSeq

DEFAULT_BUCKET_SIZE = 100
# How a bucket's slots are written: OpenIM's named fields in every pre-allocated slot, or
# compact slots holding only what differs from an empty one (docs/buckets.md, "Encodings").
Encoding = Literal["compact", "openim"]
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)


def check_seq(seq: object) -> int:
    """Return seq if it is an int >= 1, else raise InvalidSeq (bools are not ints here)."""
    if type(seq) is not int:
        raise InvalidSeq(f"seq must be an int, got {type(seq).__name__}")
    if seq < 1:
        raise InvalidSeq(f"seq must be >= 1, got {seq}")
    return seq


@dataclass(frozen=True, slots=True)
class BucketLayout:
    """OpenIM's bucket addressing: seq 1..size in bucket 0, size+1..2*size in bucket 1, ...

    Python's ``//`` floors where Go's ``/`` truncates; both agree only for seq >= 1,
    which is why every function here rejects anything else.
    """

    size: int = DEFAULT_BUCKET_SIZE
    encoding: str = "openim"

    def __post_init__(self) -> None:
        if type(self.size) is not int or self.size < 1:
            raise InvalidArgument(f"bucket size must be an int >= 1, got {self.size!r}")
        if self.encoding not in ENCODINGS:
            raise InvalidArgument(
                f"bucket encoding must be one of {ENCODINGS}, not {self.encoding!r}"
            )

    def doc_index(self, seq: int) -> int:
        """Index of the bucket holding seq: ``(seq - 1) // size``."""
        return (check_seq(seq) - 1) // self.size

    def slot_index(self, seq: int) -> int:
        """Position of seq inside its bucket: ``(seq - 1) % size``."""
        return (check_seq(seq) - 1) % self.size

    def place(self, seq: int) -> tuple[int, int]:
        """``(doc_index(seq), slot_index(seq))`` with one check of seq."""
        return divmod(check_seq(seq) - 1, self.size)

    def doc_id(self, conversation_id: str, seq: int) -> str:
        """Document id of the bucket holding seq: ``"{conversation_id}:{doc_index}"``."""
        return self.doc_id_for_index(conversation_id, self.doc_index(seq))

    @staticmethod
    def doc_id_for_index(conversation_id: str, doc_index: int) -> str:
        """Document id of bucket number doc_index."""
        return f"{conversation_id}:{doc_index}"

    def first_seq(self, doc_index: int) -> int:
        """First seq stored in bucket doc_index: ``doc_index * size + 1``."""
        if type(doc_index) is not int or doc_index < 0:
            raise InvalidArgument(f"doc index must be an int >= 0, got {doc_index!r}")
        return doc_index * self.size + 1

    def seq_of(self, doc_index: int, slot_index: int) -> int:
        """Seq stored at slot_index of bucket doc_index."""
        return self.first_seq(doc_index) + slot_index

    def seq_at(self, doc_id: str, slot_index: int) -> int:
        """Seq stored at slot_index of the bucket doc_id (``"{conversation_id}:{doc_index}"``)."""
        return self.seq_of(int(doc_id.rsplit(":", 1)[1]), slot_index)

    def group(self, conversation_id: str, seqs: Iterable[int]) -> dict[str, list[int]]:
        """Group seqs by bucket: docs in ascending doc order, seqs in input order inside each."""
        by_index: dict[int, list[int]] = {}
        for seq in seqs:
            by_index.setdefault(self.doc_index(seq), []).append(seq)
        return {
            self.doc_id_for_index(conversation_id, index): by_index[index]
            for index in sorted(by_index)
        }
