"""The benchmark's raw-driver arms on MongoDB: pull_latest(20) as one pymongo aggregate.

Each reads the collections the adapters use (``imbucket.adapters.mongo.commands``: the counters in
``seq``; the user's floor and the messages in ``msg_row``, or the floor and the buckets in
``msg``) in a single aggregate on the data collection: the user's document by its key,
``$unionWith`` of the counter, then a ``$lookup`` of the data, so the watermarks travel with
the data. It returns raw documents: no validation, no projection into views. Not stores:
they only read.
"""

from __future__ import annotations

from typing import Any

from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.connection import MongoConnection
from imbucket.domain.layout import BucketLayout

Doc = dict[str, Any]
_LAST_SEQ = 2**62  # above any seq: the upper end of a conversation's _id range


class RawMongoRowLatest:
    """The newest rows of a conversation, in one aggregate with the watermarks."""

    def __init__(self, connection: MongoConnection, layout: BucketLayout) -> None:
        self._rows = connection.collection(commands.ROWS)

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Doc]:
        """The row documents of the newest count seqs above the viewer's floors, newest first."""
        found = list(self._rows.aggregate(row_latest_pipeline(conversation_id, viewer_id, count)))
        if not found or found[0].get("max_seq") is None:
            return []
        marks = found[0]
        first = max(marks["max_seq"] - count + 1, _floor(marks))
        return [row for row in marks["rows"] if row["_id"]["s"] >= first]


class RawMongoBucketLatest:
    """The newest slots of a conversation, sliced out of its buckets in one aggregate."""

    def __init__(self, connection: MongoConnection, layout: BucketLayout) -> None:
        self._buckets = connection.collection(commands.BUCKETS)
        self._size = layout.size

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Doc]:
        """Per bucket touched: ``{doc_id, msgs}`` with only the wanted slots, oldest first."""
        pipeline = bucket_latest_pipeline(conversation_id, viewer_id, count, self._size)
        found = list(self._buckets.aggregate(pipeline))
        if not found:
            return []
        return sorted(found[0]["buckets"], key=lambda b: (len(b["doc_id"]), b["doc_id"]))


def row_latest_pipeline(conversation_id: str, viewer_id: str, count: int) -> list[Doc]:
    """The counters, the user's floor and the newest count rows by _id, in one aggregate."""
    key = commands.row_id
    rows = {"_id": {"$gte": key(conversation_id, 0), "$lte": key(conversation_id, _LAST_SEQ)}}
    return [
        *_marks(commands.ROWS, conversation_id, viewer_id),
        {
            "$lookup": {
                "from": commands.ROWS,
                "pipeline": [{"$match": rows}, {"$sort": {"_id": -1}}, {"$limit": count}],
                "as": "rows",
            }
        },
        {"$project": {"_id": 0, "max_seq": 1, "min_seq": 1, "user_min_seq": 1, "rows": 1}},
    ]


def bucket_latest_pipeline(
    conversation_id: str, viewer_id: str, count: int, size: int
) -> list[Doc]:
    """The buckets of the newest count seqs, each sliced to its wanted slots, in one aggregate.

    The server computes the first wanted seq from the watermarks, the one or two doc_ids
    (``"{conversation_id}:{index}"``, as ``BucketLayout.doc_id``), looks them up by the
    doc_id index and slices each bucket's ``msgs``.
    """
    separator = BucketLayout.doc_id_for_index("", 0).removesuffix("0")
    floor = {"$max": ["$min_seq", "$user_min_seq", 1]}

    def index(seq: Any) -> Doc:
        return {"$toLong": {"$floor": {"$divide": [{"$subtract": [seq, 1]}, size]}}}

    def doc_id(position: str) -> Doc:
        return {"$concat": [{"$literal": conversation_id + separator}, {"$toString": position}]}

    return [
        *_marks(commands.BUCKETS, conversation_id, viewer_id),
        {"$set": {"first": {"$max": [{"$subtract": ["$max_seq", count - 1]}, floor]}}},
        {"$match": {"$expr": {"$lte": ["$first", "$max_seq"]}}},
        {"$set": {"oldest": index("$first"), "newest": index("$max_seq")}},
        {"$set": {"newest_id": doc_id("$newest"), "ids": [doc_id("$oldest"), doc_id("$newest")]}},
        {
            "$lookup": {
                "from": commands.BUCKETS,
                "localField": "ids",
                "foreignField": "doc_id",
                "as": "buckets",
            }
        },
        {"$project": {"_id": 0, "buckets": {"$map": _sliced(size)}}},
    ]


def _sliced(size: int) -> Doc:
    """``$map`` over the looked-up buckets keeping each one's wanted slots (``$slice``).

    A bucket's first seq is ``index * size + 1``: the newest bucket keeps its slots up to
    max_seq, an older one from the first wanted seq to its end.
    """
    newest = {"$eq": ["$$b.doc_id", "$newest_id"]}
    base = {"$multiply": [{"$cond": [newest, "$newest", "$oldest"]}, size]}
    start = {"$max": [{"$subtract": [{"$subtract": ["$first", 1]}, "$$base"]}, 0]}
    end = {"$min": [{"$subtract": ["$max_seq", "$$base"]}, size]}
    sliced = {"$slice": ["$$b.msgs", start, {"$subtract": [end, start]}]}
    return {
        "input": "$buckets",
        "as": "b",
        "in": {"$let": {"vars": {"base": base}, "in": {"doc_id": "$$b.doc_id", "msgs": sliced}}},
    }


def _marks(collection: str, conversation_id: str, viewer_id: str) -> list[Doc]:
    """The viewer's user document in collection, the counter from ``seq``, as one document.

    ``{max_seq, min_seq, user_min_seq}``, null where a document is missing.
    """
    users = commands.UserDocs(collection)
    counter = [
        {"$match": commands.conversation_seqs(conversation_id)},
        {"$project": {"_id": 0, "max_seq": 1, "min_seq": 1}},
    ]
    merged = {name: {"$max": f"${name}"} for name in ("max_seq", "min_seq", "user_min_seq")}
    return [
        {"$match": users.key(conversation_id, viewer_id)},
        {"$project": {"_id": 0, "user_min_seq": "$min_seq"}},
        {"$unionWith": {"coll": commands.SEQS, "pipeline": counter}},
        {"$group": {"_id": None, **merged}},
    ]


def _floor(marks: Doc) -> int:
    return max(int(marks.get("min_seq") or 0), int(marks.get("user_min_seq") or 0), 1)
