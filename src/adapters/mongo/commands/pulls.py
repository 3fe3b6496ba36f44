"""A pull's view: watermarks and slots in one aggregate on the data collection."""

from __future__ import annotations

from collections.abc import Sequence

from imbucket.adapters.mongo.commands.buckets import viewed_deleters, viewed_slot
from imbucket.adapters.mongo.commands.counters import UserDocs, watermarks
from imbucket.adapters.mongo.commands.rows import viewed_rows
from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, Doc
from imbucket.adapters.mongo.commands.spills import SPILL_SEPARATOR, SPILLED_FIELDS
from imbucket.domain.model import Pick

VIEW_MARKS = ("max_seq", "min_seq", "user_min_seq")


def view_marks(conversation_id: str, user_id: str, users: UserDocs) -> list[Doc]:
    """``watermarks`` merged into one document of VIEW_MARKS (0 where a document is missing).

    No document at all when neither the counter nor the user's document exists: nothing is
    allocated then, so there is nothing to read either.
    """
    merged = {name: {"$max": f"${name}"} for name in VIEW_MARKS}
    zeroed = {name: {"$ifNull": [f"${name}", 0]} for name in VIEW_MARKS}
    return [
        *watermarks(conversation_id, user_id, users),
        {"$group": {"_id": None, **merged}},
        {"$project": {"_id": 0, **zeroed}},
    ]


def bucket_view(conversation_id: str, viewer: str, pick: Pick, size: int) -> list[Doc]:
    """One aggregate: the viewer's watermarks, then the slots of ``pick.of(marks)``.

    The buckets holding those seqs are joined by doc_id (``$lookup`` on its unique index;
    the doc_ids are computed from the seqs as ``imbucket.domain.layout`` does, in exact decimal
    arithmetic), each projecting only the wanted slots, viewer-scoped as ``read_buckets``
    does, each with its ``seq``. Reply: ``view_reply``.
    """
    doc_id = _doc_id(conversation_id, "$$seq", size)
    mine = {"$filter": {"input": "$$want", "as": "seq", "cond": {"$eq": [doc_id, "$doc_id"]}}}
    # The slot index as a plain int32 by way of its digits, whatever the seq's type (a 64-bit
    # seq makes a 64-bit remainder, which mongoeco refuses as an array index).
    index = {"$toInt": {"$toString": {"$mod": [{"$subtract": ["$$seq", 1]}, size]}}}
    slot = viewed_slot({"$arrayElemAt": ["$msgs", index]}, viewer, {"seq": "$$seq"})
    project = {"_id": 0, "doc_id": 1, "msgs": {"$map": {"input": mine, "as": "seq", "in": slot}}}
    keys = {"$setUnion": [{"$map": {"input": "$want", "as": "seq", "in": doc_id}}]}
    pipeline = [{"$project": project}, *_viewer_spilled(viewer, size)]
    return _view(conversation_id, viewer, pick, keys, UserDocs(BUCKETS), pipeline)


def _viewer_spilled(viewer: str, size: int) -> list[Doc]:
    """Stages adding ``spilled``: the viewer's side-table entries in the bucket's flagged slots.

    Joined by exact ``spill_key`` doc_ids (``$lookup`` on the doc_id index), whether or not
    the viewer is inline: the reply answers every flagged slot, with one document at most each.
    """
    flagged = {
        "$filter": {"input": "$msgs", "as": "slot", "cond": {"$eq": ["$$slot.spilled", True]}}
    }
    index = {"$toString": {"$mod": [{"$subtract": ["$$slot.seq", 1]}, size]}}
    key = {"$concat": ["$doc_id", SPILL_SEPARATOR, index, SPILL_SEPARATOR, {"$literal": viewer}]}
    return [
        {"$addFields": {"spill_keys": {"$map": {"input": flagged, "as": "slot", "in": key}}}},
        {
            "$lookup": {
                "from": BUCKETS,
                "localField": "spill_keys",
                "foreignField": "doc_id",
                "pipeline": [{"$project": SPILLED_FIELDS}],
                "as": "spilled",
            }
        },
        {"$project": {"spill_keys": 0}},
    ]


def row_view(conversation_id: str, viewer: str, pick: Pick) -> list[Doc]:
    """One aggregate: the viewer's watermarks, then the rows of ``pick.of(marks)``.

    Rows are joined by _id (``{c, s}``, built in that field order), ``del_list`` as
    ``viewed_rows`` scopes it. Reply: ``view_reply``. Listed seqs go another way, see
    ``listed_row_view``.
    """
    row = {"c": {"$literal": conversation_id}, "s": "$$seq"}
    keys = {"$map": {"input": "$want", "as": "seq", "in": row}}
    scoped = {"$addFields": {"del_list": viewed_deleters("$del_list", viewer)}}
    return _view(conversation_id, viewer, pick, keys, UserDocs(ROWS), [scoped])


def listed_row_view(conversation_id: str, viewer: str, seqs: Sequence[int]) -> list[Doc]:
    """One aggregate: the viewer's watermarks (one document, if any), then the rows of seqs.

    The rows come by ``$unionWith`` of ``viewed_rows`` (a literal ``_id: {$in}``, served by
    the _id index), each a document of its own after the marks: the caller keeps those
    ``Pick.of(marks)`` shows. A join would filter them in the server, but an emulator
    (mongoeco) answers a ``$lookup`` by reading the whole joined collection, which for one
    document per message exceeds the statement timeout at the bench's sizes.
    """
    union = {"$unionWith": {"coll": ROWS, "pipeline": viewed_rows(conversation_id, seqs, viewer)}}
    return [*view_marks(conversation_id, viewer, UserDocs(ROWS)), union]


def _view(
    conversation_id: str,
    viewer: str,
    pick: Pick,
    keys: Doc,
    joined: UserDocs,
    pipeline: list[Doc],
) -> list[Doc]:
    """The marks, the wanted seqs and their keys, then the data collection joined on them.

    ``$unwind`` right after the ``$lookup`` (coalesced into it by the server) returns one
    document per bucket or row found, each carrying the marks, so no reply document grows
    with the pull; one document without ``found`` when nothing is found. The join compares
    keys with the data's unique key (an index lookup, also on a sharded collection).
    """
    collection, key = joined.collection, joined.key_field
    return [
        *view_marks(conversation_id, viewer, joined),
        {"$addFields": {"want": _wanted(pick)}},
        {"$addFields": {"keys": keys}},
        {
            "$lookup": {
                "from": collection,
                "localField": "keys",
                "foreignField": key,
                "let": {"want": "$want"},
                "pipeline": pipeline,
                "as": "found",
            }
        },
        {"$unwind": {"path": "$found", "preserveNullAndEmptyArrays": True}},
        {"$project": {"want": 0, "keys": 0}},
    ]


def _wanted(pick: Pick) -> Doc:
    """Expression: the seqs ``pick.of(marks)`` names, over the VIEW_MARKS of the document."""
    floor = {"$max": ["$min_seq", "$user_min_seq"]}
    if pick.latest:
        # The newest pick.latest allocated seqs from max(max_seq - latest + 1, floor, 1):
        # $range counts (at most pick.latest), seqs themselves may exceed 32 bits.
        first = {"$max": [{"$subtract": ["$max_seq", pick.latest - 1]}, floor, 1]}
        count = {"$max": [0, {"$subtract": [{"$add": ["$max_seq", 1]}, "$$first"]}]}
        steps = {
            "$map": {"input": {"$range": [0, count]}, "as": "k", "in": {"$add": ["$$first", "$$k"]}}
        }
        return {"$let": {"vars": {"first": first}, "in": steps}}
    visible = {"$and": [{"$gte": ["$$seq", floor]}, {"$lte": ["$$seq", "$max_seq"]}]}
    return {"$filter": {"input": {"$literal": list(pick.seqs)}, "as": "seq", "cond": visible}}


def _doc_id(conversation_id: str, seq: str, size: int) -> Doc:
    """Expression: ``BucketLayout.doc_id`` of seq, ``"<conversation_id>:<(seq - 1) // size>"``.

    The quotient of an exact multiple of size, in decimal: exact for every 64-bit seq (a
    double is not above 2**53), and a decimal with no fractional digits prints as digits:
    IEEE 754 decimal division gives an exact quotient the exponent of the dividend minus the
    divisor's, 0 for two integers, so 300 / 100 is ``3``, never ``3.000`` (checked here on
    mongoeco only; ``$toLong`` or ``$trunc`` first would lose digits above 2**53 there).
    """
    before = {"$subtract": [seq, 1]}
    multiple = {"$subtract": [before, {"$mod": [before, size]}]}
    index = {"$toString": {"$divide": [{"$toDecimal": multiple}, size]}}
    return {"$concat": [{"$literal": f"{conversation_id}:"}, index]}
