"""mark_read on MongoDB: the tag write's read also reads max_seq and the reader's read seq.

A mark-read writes two collections: its tags (``msg`` or ``msg_row``) and the reader's read
seq (``seq_user``). No MongoDB command both returns documents and writes, except
``findAndModify`` on the one document it returns; an ``aggregate`` writes only through a
final ``$merge``/``$out``, which returns nothing (and ``$merge`` raises with ``$max`` only as
a ``whenMatched`` pipeline). Only the database-level ``bulkWrite`` of MongoDB 8.0 writes two
collections in one command. So up to 7.0 the read seq cannot ride on the tag write's read
(the tags need the slots read back) nor on its write (another collection): the raise stays
a ``findAndModify`` of its own, and a mark-read that raises costs 3 round trips.

What the read can carry is the rest: one aggregate on the data collection reads the slots
and unions the conversation's max_seq and the reader's read seq (``commands.marked_rows`` /
``commands.marked_buckets``). max_seq answers the allocation check of seqs found empty up
to it, so an empty allocated seq costs no fourth round trip; a read seq already at or beyond
the highest seq marked needs no raise (it only ever moves up, ``$max``), so marking what the
reader has already covered costs 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.mongo.replies import ReaderMarks
from domain.tags import Guard
from ports.message_store import MessageStore
from ports.seq_store import SeqStore


class MarkingStore(MessageStore, Protocol):
    """A store whose mark-read reads the reader's marks with the slots.

    ``MongoRowStore`` (``adapters/mongo/row.py``) and ``MongoBucketStore``
    (``adapters/mongo/bucket.py``).
    """

    def mark_read_marked(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> tuple[int, ReaderMarks]:
        """mark_read whose read also reads max_seq and reader_id's read seq.

        Returns how many seqs changed and the marks read. guard is called only when a seq
        found empty is beyond that max_seq.
        """
        ...


class MongoReadMarks:
    """``ReadMarks`` of mongo-row and mongo-bucket: the marked read, the tags, the raise.

    3 round trips when the read seq moves (2 when it already covers the seqs); the raise
    comes after the tag write, so when the allocation check refuses, nothing is raised.
    """

    def __init__(self, store: MarkingStore, seqs: SeqStore) -> None:
        self.store = store
        self.seqs = seqs

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """See ``ports.read_marks.ReadMarks.mark_read``."""
        if not seqs:
            return self.store.mark_read(conversation_id, seqs, reader_id, guard)
        changed, marks = self.store.mark_read_marked(conversation_id, seqs, reader_id, guard)
        if marks.read_seq < max(seqs):
            self.seqs.raise_read_seq(conversation_id, reader_id, max(seqs))
        return changed
