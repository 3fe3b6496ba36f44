"""A mark-read's read: the slots and the reader's read seq, then max_seq, in one aggregate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from imbucket.adapters.mongo.commands.buckets import read_buckets
from imbucket.adapters.mongo.commands.counters import UserDocs, conversation_seqs
from imbucket.adapters.mongo.commands.rows import row_id
from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, SEQS, Doc


def conversation_max_seq(conversation_id: str) -> Doc:
    """Stage adding the conversation's max_seq as a document of its own (none when missing).

    ``$unionWith`` of the counter by its unique key. It comes after the data, so the
    aggregate runs on the data collection (an emulator, mongoeco, reads a whole collection
    for a ``$unionWith`` of it). Reply: ``replies.marked_reply``.
    """
    return {
        "$unionWith": {
            "coll": SEQS,
            "pipeline": [
                {"$match": conversation_seqs(conversation_id)},
                {"$project": {"_id": 0, "max_seq": 1}},
            ],
        }
    }


def marked_rows(conversation_id: str, reader_id: str, seqs: Iterable[int]) -> list[Doc]:
    """One aggregate on ``msg_row``: the rows of seqs and the reader's document, then max_seq.

    A mark-read's read: the rows decide the tags, max_seq answers the allocation check of
    the seqs found empty up to it, and the read seq says whether it needs raising. The
    reader's document is one more ``_id`` of the same ``$in``.
    """
    ids = [row_id(conversation_id, seq) for seq in seqs]
    ids.append(UserDocs(ROWS).key(conversation_id, reader_id)["_id"])
    return [{"$match": {"_id": {"$in": ids}}}, conversation_max_seq(conversation_id)]


def marked_buckets(
    conversation_id: str, reader_id: str, wanted: Mapping[str, Sequence[int]]
) -> list[Doc]:
    """One aggregate on ``msg``: ``read_buckets(wanted)`` and the reader's document, then max_seq.

    The reader's doc_id is one more of the ``$match``; its projection keeps its read_seq.
    """
    reader = UserDocs(BUCKETS).key(conversation_id, reader_id)["doc_id"]
    return [
        *read_buckets(wanted, also=(reader,)),
        conversation_max_seq(conversation_id),
    ]
