"""mark_read on MongoDB: one read of the slots and marks, one write of the tags and the raise.

A mark-read writes its tags and raises the reader's read seq. Both live in the data
collection (``msg`` or ``msg_row``; the user's document is a ``commands.UserDocs`` key of
it), so the raise is one more upsert of the tag write's own ``update`` command
(``imbucket.adapters.mongo.mark_read_writes``): no command before MongoDB 8.0 writes two
collections, which is why the user documents are not in OpenIM's ``seq_user``.

The read is one aggregate on the data collection: the slots, the reader's document by its
key in the same ``$match``, and the conversation's max_seq by ``$unionWith``
(``commands.marked_rows`` / ``commands.marked_buckets``). max_seq answers the allocation
check of seqs found empty up to it, so an empty allocated seq costs no third round trip; a
read seq already at or beyond the highest seq marked needs no raise (it only ever moves up,
``$max``). So a mark-read costs 2 round trips: the read, then one write (the tags with the
raise, or the raise alone when no tag changes). When the allocation check refuses, nothing
is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.replies import ReaderMarks
from imbucket.domain.tags import Guard
from imbucket.ports.message_store import MessageStore


class MarkingStore(MessageStore, Protocol):
    """A store whose mark-read reads the reader's marks with the slots and raises with the tags.

    ``MongoRowStore`` (``adapters/mongo/row.py``) and ``MongoBucketStore``
    (``adapters/mongo/bucket.py``).
    """

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """mark_read that also raises reader_id's read seq to ``max(seqs)`` (seqs not empty).

        Returns how many seqs changed. guard is called only when a seq found empty is beyond
        the max_seq read with the slots; when it raises, nothing is written.
        """
        ...


def raise_needed(
    users: commands.UserDocs,
    conversation_id: str,
    reader_id: str,
    seqs: Sequence[int],
    marks: ReaderMarks,
) -> commands.Update | None:
    """The raise of reader_id's read seq to ``max(seqs)``, None when it is there already."""
    top = max(seqs)
    if marks.read_seq >= top:
        return None
    return commands.raise_read_seq(users, conversation_id, reader_id, top)


class MongoReadMarks:
    """``ReadMarks`` of mongo-row and mongo-bucket: the marked read, then one write.

    2 round trips (see the module docstring).
    """

    def __init__(self, store: MarkingStore) -> None:
        self.store = store

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """See ``imbucket.ports.read_marks.ReadMarks.mark_read``."""
        if not seqs:
            return self.store.mark_read(conversation_id, seqs, reader_id, guard)
        return self.store.mark_read_raising(conversation_id, seqs, reader_id, guard)
