"""Commands on buckets (collection ``msg``): writes, tag patches, reads of slots, counts.

Why free-slot conditions use ``{"$type": "null"}`` and ``{"$ne": true}`` instead of
``{"msgs.3.msg": null}``: on an array of sub-documents a numeric path component is read
both as the array position and as a field name inside every element. None of the 100
elements has a field ``"3"``, so each yields "missing", and ``null`` equality matches
missing: the filter would match every bucket. ``$type`` never matches missing, and
``$ne: true`` is false only where the real slot holds ``true``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from imbucket.adapters.codec import message_to_doc, revoke_to_doc, slot_to_doc
from imbucket.adapters.mongo.commands.shapes import Doc, Update, count_group, operators, tag_ops
from imbucket.domain.budget import BudgetConditions, TagBudget
from imbucket.domain.model import (
    EMPTY_SLOT,
    OTHER_DELETERS,
    PURGED_SLOT,
    Message,
    Revoke,
    Slot,
    SlotPatch,
)


def slot_path(index: int, name: str = "") -> str:
    """Dotted path of a bucket slot, or of one field inside it: ``msgs.3`` / ``msgs.3.msg``."""
    return f"msgs.{index}.{name}" if name else f"msgs.{index}"


def free_slot(index: int | None = None) -> Doc:
    """Conditions holding only while a slot (a bucket slot, or a row when None) is free."""
    prefix = "" if index is None else slot_path(index) + "."
    return {f"{prefix}msg": {"$type": "null"}, f"{prefix}purged": {"$ne": True}}


def new_bucket(doc_id: str, slots: Mapping[int, Slot], size: int) -> Doc:
    """A whole bucket for insert_one: every one of the size slots present, every key set."""
    return {"doc_id": doc_id, "msgs": [slot_to_doc(slots.get(i, EMPTY_SLOT)) for i in range(size)]}


def open_bucket(doc_id: str, slots: Mapping[int, Slot], size: int) -> Update:
    """An upsert inserting the whole bucket iff doc_id has none; one there is left as it is.

    Its reply tells the two apart: the bucket is created where the upsert inserted.
    """
    return Update(
        {"doc_id": doc_id},
        {"$setOnInsert": {"msgs": new_bucket(doc_id, slots, size)["msgs"]}},
        upsert=True,
    )


def write_messages(doc_id: str, messages: Mapping[int, Message]) -> Update:
    """Fill the named slots of an existing bucket, only if every one of them is free."""
    condition: Doc = {"doc_id": doc_id}
    for index in messages:
        condition.update(free_slot(index))
    update = {"$set": {slot_path(i, "msg"): message_to_doc(m) for i, m in messages.items()}}
    return Update(condition, update)


def set_revoke(doc_id: str, index: int, revoke: Revoke) -> Update:
    """Set a slot's revoke, only if it is neither revoked nor purged."""
    condition = {
        "doc_id": doc_id,
        slot_path(index, "revoke"): {"$type": "null"},
        slot_path(index, "purged"): {"$ne": True},
    }
    return Update(condition, {"$set": {slot_path(index, "revoke"): revoke_to_doc(revoke)}})


def patch_bucket(
    doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
) -> Update:
    """All tag changes of one bucket in one update; a purge replaces the whole slot.

    The filter matches only while no slot that gets tags is purged (purged slots keep no
    tags; the caller drops them and retries), and, with a budget, only while the patch keeps
    the bucket within it (``$expr`` over the slots' array sizes, evaluated on the document
    being updated).
    """
    sets: Doc = {}
    adds: Doc = {}
    condition: Doc = {"doc_id": doc_id}
    for index, patch in patches.items():
        if patch.purge:
            sets[slot_path(index)] = slot_to_doc(PURGED_SLOT)
        else:
            tag_sets, tag_adds = tag_ops(patch, slot_path(index) + ".")
            sets.update(tag_sets)
            adds.update(tag_adds)
            condition[slot_path(index, "purged")] = {"$ne": True}
    within = [] if budget is None else _within(budget.conditions(patches))
    if within:
        condition["$expr"] = {"$and": within}
    return Update(condition, operators(sets, adds))


def _within(within: BudgetConditions) -> list[Doc]:
    """The budget conditions as ``$expr`` terms, in slot order."""
    budget, deleting = within.budget, within.deleting
    conditions = [{"$lt": [_entries(i, "del_list"), budget.deleters_per_slot]} for i in deleting]
    conditions += [
        {"$lt": [_entries(i, "read_by"), budget.readers_per_slot]} for i in within.reading
    ]
    if deleting:
        every_slot = {
            "$map": {
                "input": "$msgs",
                "as": "slot",
                "in": {"$size": {"$ifNull": ["$$slot.del_list", []]}},
            }
        }
        total = {"$add": [{"$sum": every_slot}, len(deleting)]}
        conditions.append({"$lte": [total, budget.deleters_per_bucket]})
    return conditions


def _entries(index: int, name: str) -> Doc:
    """Expression: the length of array field name of slot index (0 when missing)."""
    return {
        "$let": {
            "vars": {"slot": {"$arrayElemAt": ["$msgs", index]}},
            "in": {"$size": {"$ifNull": [f"$$slot.{name}", []]}},
        }
    }


def bucket_size(doc_id: str) -> list[Doc]:
    """Aggregate returning the BSON size of one bucket as ``bytes``."""
    return [
        {"$match": {"doc_id": doc_id}},
        {"$project": {"_id": 0, "bytes": {"$bsonSize": "$$ROOT"}}},
    ]


def read_buckets(
    wanted: Mapping[str, Sequence[int]], viewer: str | None = None, also: Sequence[str] = ()
) -> list[Doc]:
    """One aggregate reading only the requested slots of one or several buckets.

    ``$map`` over the wanted indexes with ``$arrayElemAt`` keeps the slot order of the
    request; with several buckets a ``$switch`` on doc_id picks each bucket's own indexes
    (doc_ids inside an expression are ``$literal``: a conversation id may start with ``$``).
    With a viewer each slot's ``del_list`` is replaced inside the ``$map`` by what
    ``viewed_deleters`` computes, plus ``del_count``: the list never leaves the server.
    also: doc_ids of user documents (``UserDocs``) read in the same ``$match``, each
    returned with its read_seq and no slots.
    """
    branches = [(doc_id, _pick(indexes, viewer)) for doc_id, indexes in wanted.items()]
    if len(branches) == 1 and not also:
        selected: Doc = branches[0][1]
    else:
        selected = {
            "$switch": {
                "branches": [
                    {"case": {"$eq": ["$doc_id", {"$literal": doc_id}]}, "then": pick}
                    for doc_id, pick in branches
                ],
                "default": [],
            }
        }
    fields: Doc = {"_id": 0, "doc_id": 1, "msgs": selected}
    if also:
        fields["read_seq"] = 1
    return [{"$match": {"doc_id": {"$in": [*wanted, *also]}}}, {"$project": fields}]


def _pick(indexes: Iterable[int], viewer: str | None = None) -> Doc:
    slot: Doc = {"$arrayElemAt": ["$msgs", "$$index"]}
    if viewer is not None:
        slot = viewed_slot(slot, viewer)
    return {"$map": {"input": list(indexes), "as": "index", "in": slot}}


def viewed_slot(slot: Doc, viewer: str, extra: Doc | None = None) -> Doc:
    """Expression: slot with ``del_list`` as viewer reads it, ``del_count``, and extra fields."""
    scoped = {
        "del_list": viewed_deleters("$$slot.del_list", viewer),
        "del_count": {"$size": {"$ifNull": ["$$slot.del_list", []]}},
        **(extra or {}),
    }
    return {"$let": {"vars": {"slot": slot}, "in": {"$mergeObjects": ["$$slot", scoped]}}}


def viewed_deleters(field: str, viewer: str) -> Doc:
    """Expression: what ``imbucket.domain.model.viewed_deleters`` says of the array field.

    ``[viewer]`` if the field holds viewer, ``[""]`` if it holds others, else ``[]``;
    viewer is ``$literal``.
    """
    user = {"$literal": viewer}
    return {
        "$let": {
            "vars": {"users": {"$ifNull": [field, []]}},
            "in": {
                "$cond": [
                    {"$in": [user, "$$users"]},
                    [user],
                    {"$cond": [{"$gt": [{"$size": "$$users"}, 0]}, [OTHER_DELETERS], []]},
                ]
            },
        }
    }


def bucket_exists(doc_id: str) -> Doc:
    """Filter of one bucket, for count_documents(limit=1)."""
    return {"doc_id": doc_id}


_FILLED_SLOTS = {
    "$filter": {
        "input": {"$ifNull": ["$msgs", []]},
        "as": "slot",
        "cond": {"$eq": [{"$type": "$$slot.msg"}, "object"]},
    }
}
# User documents (read_seq) and send claims (claimed_at) are kept in msg, but are no data.
COUNT_BUCKET_MESSAGES = count_group(
    {
        "$or": [
            {"$ne": [{"$type": "$read_seq"}, "missing"]},
            {"$ne": [{"$type": "$claimed_at"}, "missing"]},
        ]
    },
    {"$size": _FILLED_SLOTS},
    not_data={"$eq": [{"$type": "$msgs"}, "missing"]},
)
