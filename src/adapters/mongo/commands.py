"""Every filter, update, pipeline, index and option the MongoDB adapters send, as plain data.

Pure functions without I/O: each adapter primitive passes one of these to exactly one
pymongo call, and tests/unit/test_mongo_commands.py pins them document by document.

Why free-slot conditions use ``{"$type": "null"}`` and ``{"$ne": true}`` instead of
``{"msgs.3.msg": null}``: on an array of sub-documents a numeric path component is read
both as the array position and as a field name inside every element. None of the 100
elements has a field ``"3"``, so each yields "missing", and ``null`` equality matches
missing: the filter would match every bucket. ``$type`` never matches missing, and
``$ne: true`` is false only where the real slot holds ``true``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from imbucket.adapters.codec import message_to_doc, revoke_to_doc, slot_to_doc
from imbucket.adapters.timeouts import Timeouts, millis
from imbucket.domain.budget import BudgetConditions, TagBudget
from imbucket.domain.model import (
    EMPTY_SLOT,
    OTHER_DELETERS,
    PURGED_SLOT,
    Message,
    Pick,
    Revoke,
    Slot,
    SlotPatch,
)

Doc = dict[str, Any]

DEFAULT_URL = "mongodb://127.0.0.1:27017/imbucket"
DEFAULT_DATABASE = "imbucket"
CLIENT_DEFAULTS: Mapping[str, Any] = {"appname": "imbucket"}

BUCKETS = "msg"
ROWS = "msg_row"
SEQS = "seq"
SENDS = "seq_send"
META = "meta"

# The first server version that can cluster a collection on _id.
CLUSTERED_SINCE = (5, 3)


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: its key pattern and whether it is unique."""

    keys: tuple[tuple[str, int], ...]
    unique: bool = True
    expire_after_seconds: int | None = None  # a TTL index


@dataclass(frozen=True, slots=True)
class Update:
    """``update_one(filter, update, upsert=upsert)``, alone or as a bulk_write UpdateOne."""

    filter: Doc
    update: Doc
    upsert: bool = False


@dataclass(frozen=True, slots=True)
class FindAndUpdate:
    """``find_one_and_update(filter, update, projection, upsert, return the new document)``."""

    filter: Doc
    update: Doc
    projection: Doc = field(default_factory=dict)
    upsert: bool = True
    return_new: bool = True


@dataclass(frozen=True, slots=True)
class InsertMany:
    """``insert_many(documents, ordered=ordered)``."""

    documents: list[Doc]
    ordered: bool = False


# Unique keys only: nothing inside the msgs array is indexed (as in OpenIM), and rows are
# addressed by _id alone. Spilled deleters are documents of ``msg`` keyed by doc_id
# (spill_key): the doc_id index makes their insert a set-add and serves reads by slot as a
# range, and keeps them beside their bucket.
INDEXES: Mapping[str, tuple[IndexSpec, ...]] = {
    BUCKETS: (IndexSpec((("doc_id", 1),)),),
    ROWS: (),
    SEQS: (IndexSpec((("conversation_id", 1),)),),
    # Claims expire by themselves: the TTL monitor deletes each once its expire_at is past.
    SENDS: (
        IndexSpec((("conversation_id", 1), ("client_msg_id", 1))),
        IndexSpec((("expire_at", 1),), unique=False, expire_after_seconds=0),
    ),
}

# The counters of a conversation's and of a user's document; a new document gets 0 in those
# not being raised, so every user document holds both (``UserDocs.ONLY`` relies on it).
CONVERSATION_COUNTERS = ("max_seq", "min_seq")
USER_COUNTERS = ("min_seq", "read_seq")

STORAGE_STATS: list[Doc] = [{"$collStats": {"storageStats": {}}}]


def client_options(url: str, timeouts: Timeouts | None = None) -> Doc:
    """CLIENT_DEFAULTS and the bounds of every wait, except what the URL sets (the URL wins).

    An unreachable or silent server fails a call within seconds, not pymongo's 30 s or never:
    server selection and connecting within ``connect``, a reply within ``statement`` (the
    socket timeout), a pooled connection within ``pool``. pymongo retries a read or write
    once, so a call waits at most 2 x (connect + pool + connect + statement).
    """
    bounds = timeouts or Timeouts()
    options = {
        **CLIENT_DEFAULTS,
        "serverSelectionTimeoutMS": millis(bounds.connect),
        "connectTimeoutMS": millis(bounds.connect),
        "socketTimeoutMS": millis(bounds.statement),
        "waitQueueTimeoutMS": millis(bounds.pool),
    }
    query = url.partition("?")[2]
    given = {part.partition("=")[0].lower() for part in query.split("&") if part}
    return {name: value for name, value in options.items() if name.lower() not in given}


# ---- buckets (collection `msg`) ------------------------------------------------------------


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
            tag_sets, tag_adds = _tag_ops(patch, slot_path(index) + ".")
            sets.update(tag_sets)
            adds.update(tag_adds)
            condition[slot_path(index, "purged")] = {"$ne": True}
    within = [] if budget is None else _within(budget.conditions(patches))
    if within:
        condition["$expr"] = {"$and": within}
    return Update(condition, _operators(sets, adds))


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


# A spilled deleter is a document of ``msg``: ``{doc_id: "<doc_id>\x1f<slot>\x1f<user_id>"}``.
# Ids never hold control characters (imbucket.domain.model.check_id), so the separator sorts below
# every character of an id: the deleters of one slot are exactly the doc_ids in [prefix,
# prefix with "\x1f" → "\x20"), beside their bucket and apart from its user documents
# (``UserDocs``: one separator, not two). In ``msg`` and not a collection of its own, so the
# first spill of a slot is one ``update`` command with the patch flagging it
# (``flagging_patch``); no command writes two collections.
SPILL_SEPARATOR = "\x1f"
_AFTER_SEPARATOR = chr(ord(SPILL_SEPARATOR) + 1)


def spill_key(doc_id: str, slot: int, user_id: str) -> str:
    """The doc_id of one spilled deleter (see SPILL_SEPARATOR)."""
    return f"{spill_prefix(doc_id, slot)}{user_id}"


def spill_prefix(doc_id: str, slot: int) -> str:
    """The doc_id prefix every spilled deleter of (doc_id, slot) starts with."""
    return f"{doc_id}{SPILL_SEPARATOR}{slot}{SPILL_SEPARATOR}"


def spill_entry(key: str) -> tuple[str, int, str]:
    """(doc_id, slot, user_id) of a spilled deleter's doc_id."""
    doc_id, slot, user_id = key.split(SPILL_SEPARATOR, 2)
    return doc_id, int(slot), user_id


def spill_documents(entries: Sequence[tuple[str, int, str]]) -> InsertMany:
    """Spilled deleters as documents; a repeated doc_id is a reported duplicate (a set-add)."""
    documents = [{"doc_id": spill_key(d, i, u)} for d, i, u in entries]
    return InsertMany(documents, ordered=False)


def spill_upserts(entries: Sequence[tuple[str, int, str]]) -> list[Update]:
    """Spilled deleters as upserts, to follow ``flagging_patch`` in its ordered command."""
    keys = [spill_key(d, i, u) for d, i, u in entries]
    return [Update({"doc_id": key}, {"$setOnInsert": {"doc_id": key}}, upsert=True) for key in keys]


def flagging_patch(
    doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
) -> Update | None:
    """``patch_bucket`` as a guard: an upsert that collides on doc_id when refused.

    Refused (a target slot purged), the upsert inserts a new document with the bucket's
    doc_id, which the unique index refuses: a write error, which stops an ordered command
    before the spilled deleters that follow it (``spill_upserts``). None when the patch has
    budget conditions: an upsert's filter may not hold ``$expr`` (code 224).
    """
    command = patch_bucket(doc_id, patches, budget)
    if "$expr" in command.filter:
        return None
    return Update(command.filter, command.update, upsert=True)


def spilled_in(wanted: Mapping[str, Sequence[int]]) -> Doc:
    """Filter of the spilled deleters of the given slots (find or delete_many): doc_id ranges."""
    branches = [
        {"doc_id": {"$gte": prefix, "$lt": prefix[:-1] + _AFTER_SEPARATOR}}
        for doc_id, indexes in wanted.items()
        for prefix in (spill_prefix(doc_id, index) for index in indexes)
    ]
    return branches[0] if len(branches) == 1 else {"$or": branches}


def spilled_by(wanted: Mapping[str, Sequence[int]], viewer: str) -> Doc:
    """Filter of viewer's own spilled entries in the given slots: exact doc_ids, no range."""
    keys = [
        spill_key(doc_id, index, viewer) for doc_id, indexes in wanted.items() for index in indexes
    ]
    return {"doc_id": {"$in": keys}}


SPILLED_FIELDS: Doc = {"_id": 0, "doc_id": 1}


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
        slot = _viewed_slot(slot, viewer)
    return {"$map": {"input": list(indexes), "as": "index", "in": slot}}


def _viewed_slot(slot: Doc, viewer: str, extra: Doc | None = None) -> Doc:
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


def _count(is_user: Doc, messages: Doc, not_data: Doc | None = None, **extra: Doc) -> list[Doc]:
    """One ``$group`` counting messages and the user documents (and their bytes) apart.

    The user documents (``UserDocs``) share the data collection's storage statistics; the
    footprint reported is the data's, so ``replies.store_stats`` takes them out again.
    not_data (default: is_user) marks every document that is no bucket or row, the user
    documents and spilled deleters: those are not counted as documents, but spilled
    deleters are data, so their bytes stay.
    """
    user_bytes = {"$cond": [is_user, {"$bsonSize": "$$ROOT"}, 0]}
    return [
        {
            "$group": {
                "_id": None,
                "messages": {"$sum": messages},
                "aside_docs": {"$sum": {"$cond": [not_data or is_user, 1, 0]}},
                "user_bytes": {"$sum": user_bytes},
                **extra,
            }
        }
    ]


_FILLED_SLOTS = {
    "$filter": {
        "input": {"$ifNull": ["$msgs", []]},
        "as": "slot",
        "cond": {"$eq": [{"$type": "$$slot.msg"}, "object"]},
    }
}
COUNT_BUCKET_MESSAGES = _count(
    {"$ne": [{"$type": "$read_seq"}, "missing"]},
    {"$size": _FILLED_SLOTS},
    not_data={"$eq": [{"$type": "$msgs"}, "missing"]},
)


# ---- rows (collection `msg_row`) -----------------------------------------------------------


def row_id(conversation_id: str, seq: int) -> Doc:
    """The _id of a row; field order matters for equality, so it is always c then s."""
    return {"c": conversation_id, "s": seq}


def rows_in(conversation_id: str, seqs: Iterable[int]) -> Doc:
    """Filter of the rows of seqs: one find per call."""
    return {"_id": {"$in": [row_id(conversation_id, seq) for seq in seqs]}}


def viewed_rows(conversation_id: str, seqs: Iterable[int], viewer: str) -> list[Doc]:
    """Aggregate: the rows of seqs with ``del_list`` as viewer reads it (one round trip)."""
    scoped = {"del_list": viewed_deleters("$del_list", viewer)}
    return [{"$match": rows_in(conversation_id, seqs)}, {"$addFields": scoped}]


def fill_row(conversation_id: str, message: Message) -> Update:
    """Store a message in a row that holds only tags (or create the row), iff it is free."""
    condition = {"_id": row_id(conversation_id, message.seq), **free_slot()}
    return Update(condition, _upsert_ops({"msg": message_to_doc(message)}, {}), upsert=True)


def revoke_row(conversation_id: str, seq: int, revoke: Revoke) -> Update:
    """Set a row's revoke (creating the row) iff it is neither revoked nor purged.

    An existing row that fails the condition makes the upsert collide on _id: the caller
    gets a duplicate-key error for "already revoked or purged".
    """
    condition = {
        "_id": row_id(conversation_id, seq),
        "revoke": {"$type": "null"},
        "purged": {"$ne": True},
    }
    return Update(condition, _upsert_ops({"revoke": revoke_to_doc(revoke)}, {}), upsert=True)


def patch_row(conversation_id: str, seq: int, patch: SlotPatch) -> Update:
    """Tag changes of one row as an upsert, so tags written before the message are kept."""
    if patch.purge:
        update: Doc = {"$set": slot_to_doc(PURGED_SLOT)}
    else:
        update = _upsert_ops(*_tag_ops(patch, ""))
    return Update({"_id": row_id(conversation_id, seq)}, update, upsert=True)


def row_collection_options(server_version: Sequence[int]) -> Doc:
    """create_collection options: clustered on _id from MongoDB 5.3, plain before."""
    if tuple(server_version[:2]) >= CLUSTERED_SINCE:
        return {"clusteredIndex": {"key": {"_id": 1}, "unique": True}}
    return {}


_IS_USER_ROW = {"$ne": [{"$type": "$_id.u"}, "missing"]}
COUNT_ROW_MESSAGES = _count(
    _IS_USER_ROW,
    {"$cond": [{"$eq": [{"$type": "$msg"}, "object"]}, 1, 0]},
    key_bytes={"$sum": {"$cond": [_IS_USER_ROW, 0, {"$bsonSize": "$_id"}]}},
)


def _tag_ops(patch: SlotPatch, prefix: str) -> tuple[Doc, Doc]:
    """($set, $addToSet) of a non-purge patch on the slot fields under prefix."""
    sets: Doc = {f"{prefix}is_read": True} if patch.set_read else {}
    if patch.mark_spilled:
        sets[f"{prefix}spilled"] = True
    adds: Doc = {}
    if patch.add_deleted_by is not None:
        adds[f"{prefix}del_list"] = patch.add_deleted_by
    if patch.add_read_by is not None:
        adds[f"{prefix}read_by"] = patch.add_read_by
    return sets, adds


def _upsert_ops(sets: Doc, adds: Doc) -> Doc:
    """The $set and $addToSet, plus $setOnInsert of every other slot key (a complete row)."""
    touched = set(sets) | set(adds)
    defaults = {k: v for k, v in slot_to_doc(EMPTY_SLOT).items() if k not in touched}
    return _operators(sets, adds, defaults)


def _operators(sets: Doc, adds: Doc, on_insert: Doc | None = None) -> Doc:
    """An update document without empty operators (MongoDB rejects ``{"$set": {}}``)."""
    operators = {"$set": sets, "$addToSet": adds, "$setOnInsert": on_insert or {}}
    return {name: value for name, value in operators.items() if value}


# ---- seqs (collection `seq`, user documents in the data collection) and layout (`meta`) -----


def allocate(conversation_id: str, n: int) -> FindAndUpdate:
    """Reserve n seqs: ``$inc`` max_seq, creating the counter on first use."""
    return FindAndUpdate(
        {"conversation_id": conversation_id},
        {"$inc": {"max_seq": n}, "$setOnInsert": {"min_seq": 0}},
        {"_id": 0, "max_seq": 1},
    )


def conversation_seqs(conversation_id: str) -> Doc:
    """Filter of a conversation's counter document."""
    return {"conversation_id": conversation_id}


# Between a conversation id and a user id in a user document's key; ids never hold control
# characters (imbucket.domain.model.check_id), so the key sorts as (conversation_id, user_id) does.
USER_SEPARATOR = "\x1f"


@dataclass(frozen=True, slots=True)
class UserDocs:
    r"""Where a backend keeps its per-user watermarks (min_seq, read_seq): its data collection.

    ``collection`` is ``msg`` or ``msg_row``. A user's document is keyed by that collection's
    own unique key, built from (conversation_id, user_id) so that it sorts, and shards, with
    the conversation's data: in ``msg`` ``doc_id: "<conv>\x1f<user>"`` (no bucket's doc_id
    holds a control character), in ``msg_row`` ``_id: {c: <conv>, u: <user>}`` (a row's is
    ``{c, s}``). In the collection of the tags, a mark-read's read-seq raise is one more
    update of the tag write's own ``update`` command (a tag write is held to two round
    trips): no command before MongoDB 8.0 writes two collections. OpenIM keeps them in ``seq_user``.
    """

    collection: str

    # Filter of the user documents alone: each holds both USER_COUNTERS, no data document any.
    ONLY: ClassVar[Doc] = {"read_seq": {"$exists": True}}

    @property
    def key_field(self) -> str:
        """The collection's unique key: ``_id`` of rows, ``doc_id`` of buckets."""
        return "_id" if self.collection == ROWS else "doc_id"

    def key(self, conversation_id: str, user_id: str) -> Doc:
        """Filter of one user's document."""
        if self.collection == ROWS:
            return {"_id": {"c": conversation_id, "u": user_id}}
        return {"doc_id": f"{conversation_id}{USER_SEPARATOR}{user_id}"}

    def keys_in(self, keys: Iterable[tuple[str, str]]) -> Doc:
        """Filter of the documents of several (conversation_id, user_id)."""
        values = [self.key(c, u)[self.key_field] for c, u in keys]
        return {self.key_field: {"$in": values}}

    def owner(self, document: Doc) -> tuple[str, str]:
        """(conversation_id, user_id) of a user document, from its key."""
        key = document[self.key_field]
        if self.collection == ROWS:
            return key["c"], key["u"]
        conversation_id, user_id = key.split(USER_SEPARATOR)
        return conversation_id, user_id


def raise_to(key: Doc, name: str, value: int, counters: Sequence[str]) -> FindAndUpdate:
    """Raise counter name to at least value (``$max``: never down), creating the document.

    counters: all of the document's (CONVERSATION_COUNTERS or USER_COUNTERS).
    """
    others = {other: 0 for other in counters if other != name}
    update = {"$max": {name: value}, "$setOnInsert": others}
    return FindAndUpdate(dict(key), update, {"_id": 0, name: 1})


def raise_read_seq(users: UserDocs, conversation_id: str, user_id: str, seq: int) -> Update:
    """``raise_to`` of a read seq as an upsert, to ride on a tag write's bulk write."""
    command = raise_to(users.key(conversation_id, user_id), "read_seq", seq, USER_COUNTERS)
    return Update(command.filter, command.update, upsert=True)


def watermarks(conversation_id: str, user_id: str, users: UserDocs) -> list[Doc]:
    """One aggregate on the data collection: the user's floor, then the conversation counters.

    The user's document by its unique key, then ``$unionWith`` (MongoDB >= 4.4) of the
    counter by its own: one round trip, whichever of the two exists. It starts on the data
    collection because an emulator (mongoeco) reads a whole collection for a ``$unionWith``
    or ``$lookup`` of it, and ``seq`` is the small one.
    """
    return [
        {"$match": users.key(conversation_id, user_id)},
        {"$project": {"_id": 0, "user_min_seq": "$min_seq"}},
        {
            "$unionWith": {
                "coll": SEQS,
                "pipeline": [
                    {"$match": conversation_seqs(conversation_id)},
                    {"$project": {"_id": 0, "max_seq": 1, "min_seq": 1}},
                ],
            }
        },
    ]


# ---- a mark-read's read: the slots and the reader's read seq, then max_seq ----------------


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


# ---- a pull's view: watermarks and slots in one aggregate on the data collection ----------

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
    slot = _viewed_slot({"$arrayElemAt": ["$msgs", index]}, viewer, {"seq": "$$seq"})
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


# ---- seqs recorded by send per client_msg_id (collection `seq_send`) ------------------------

SENT_SEQ_FIELDS: Doc = {"_id": 0, "client_msg_id": 1, "seq": 1}
# The seq of a claim whose sender has not allocated yet (seqs start at 1).
UNALLOCATED = 0


def claim_sends(
    conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
) -> InsertMany:
    """One document per claim; the unique index refuses a client_msg_id claimed before.

    Unordered, so every new claim lands whatever its neighbours' duplicates. claimed_at is
    at (epoch ms); with a retention window (at - since), expire_at is when the TTL index on
    it may delete the claim (a document without expire_at never expires).
    """
    times = claim_times(at, since)
    documents = [
        {"conversation_id": conversation_id, "client_msg_id": cid, "seq": seq, **times}
        for cid, seq in sorted(claims.items())
    ]
    return InsertMany(documents, ordered=False)


def claim_pending(
    conversation_id: str, client_msg_ids: Sequence[str], owner: str, at: int, since: int
) -> InsertMany:
    """One pending claim (seq UNALLOCATED) per client_msg_id, owned by owner; see claim_sends."""
    times = claim_times(at, since)
    documents = [
        {
            "conversation_id": conversation_id,
            "client_msg_id": cid,
            "seq": UNALLOCATED,
            "owner": owner,
            **times,
        }
        for cid in sorted(client_msg_ids)
    ]
    return InsertMany(documents, ordered=False)


def take_over(
    conversation_id: str,
    client_msg_ids: Sequence[str],
    owner: str,
    at: int,
    since: int,
    stale_before: int,
) -> list[Update]:
    """For client_msg_ids claimed before: owner's pending claim where the claim is dead.

    Dead: expired before since, or still pending since before stale_before (its sender
    died before recording a seq).
    """
    times = claim_times(at, since)
    stale = {"seq": UNALLOCATED, "claimed_at": {"$lt": _date(stale_before)}}
    return [
        Update(
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "$or": [{"claimed_at": {"$lt": _date(since)}}, stale],
            },
            {"$set": {"seq": UNALLOCATED, "owner": owner, **times}},
        )
        for cid in sorted(client_msg_ids)
    ]


def record_seqs(conversation_id: str, seqs: Mapping[str, int], owner: str) -> list[Update]:
    """Write the seq of each pending claim owner still holds (a compare-and-set)."""
    return [
        Update(
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "owner": owner,
                "seq": UNALLOCATED,
            },
            {"$set": {"seq": seq}},
        )
        for cid, seq in sorted(seqs.items())
    ]


def claim_times(at: int, since: int) -> Doc:
    """claimed_at and, when there is a retention window, expire_at, as BSON dates."""
    times: Doc = {"claimed_at": _date(at)}
    if since:
        times["expire_at"] = _date(at + (at - since))
    return times


def replace_expired(
    conversation_id: str, claims: Mapping[str, int], at: int, since: int
) -> list[Update]:
    """For client_msg_ids claimed before: replace the claim only if it expired before since."""
    times = claim_times(at, since)
    return [
        Update(
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "claimed_at": {"$lt": _date(since)},
            },
            {"$set": {"seq": seq, **times}},
        )
        for cid, seq in sorted(claims.items())
    ]


def sends_in(conversation_id: str, client_msg_ids: Iterable[str], since: int = 0) -> Doc:
    """Filter of the live claims of client_msg_ids (find with SENT_SEQ_FIELDS)."""
    found: Doc = {
        "conversation_id": conversation_id,
        "client_msg_id": {"$in": list(client_msg_ids)},
    }
    if since:
        found["claimed_at"] = {"$gte": _date(since)}
    return found


def claims_before(before: int) -> Doc:
    """Filter of the claims recorded before before (epoch ms)."""
    return {"claimed_at": {"$lt": _date(before)}}


def _date(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)


def record_layout(collection: str, bucket_size: int) -> FindAndUpdate:
    """Record the bucket size of collection on first open; return what is recorded."""
    return FindAndUpdate(
        {"_id": collection},
        {"$setOnInsert": {"bucket_size": bucket_size}},
        {"_id": 0, "bucket_size": 1},
    )


def record_cache_binding(collection: str, binding: str) -> FindAndUpdate:
    """Record which cache fronts collection's store on first open; return what is recorded."""
    return FindAndUpdate(
        {"_id": f"{collection}:cache"},
        {"$setOnInsert": {"binding": binding}},
        {"_id": 0, "binding": 1},
    )


def replace_cache_binding(collection: str, expected: str, binding: str) -> FindAndUpdate:
    """Set the cache binding of collection's store if it is expected (no upsert)."""
    return FindAndUpdate(
        {"_id": f"{collection}:cache", "binding": expected},
        {"$set": {"binding": binding}},
        {"_id": 0, "binding": 1},
        upsert=False,
    )


# ---- streaming scans (migrate, verify) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Find:
    """A find: ``collection.find(filter, projection).sort(sort).limit(limit)``."""

    filter: Doc
    projection: Doc | None
    sort: list[tuple[str, int]]
    limit: int


# The key each scanned collection is read in order of: its unique index, or for rows the
# fields of _id (sorted by _id itself, whose order is (c, s): the filter names the fields
# because not every server compares embedded documents with $gt). USERS_IN: the user
# documents kept in a data collection (``UserDocs``), by their keys.
SCAN_KEYS: Mapping[str, tuple[str, ...]] = {
    BUCKETS: ("doc_id",),
    ROWS: ("_id.c", "_id.s"),
    SEQS: ("conversation_id",),
    SENDS: ("conversation_id", "client_msg_id"),
}
USERS_IN = "users in "  # + the data collection: a scan of its user documents
SCAN_KEYS_OF_USERS: Mapping[str, tuple[str, ...]] = {BUCKETS: ("doc_id",), ROWS: ("_id.c", "_id.u")}

# Filters keeping a data collection's own documents, not the user documents it also holds.
DATA_ONLY: Mapping[str, Doc] = {
    BUCKETS: {"msgs": {"$exists": True}},
    ROWS: {"_id.s": {"$exists": True}},
}


def _scan_keys(scanned: str) -> tuple[str, ...]:
    if scanned.startswith(USERS_IN):
        return SCAN_KEYS_OF_USERS[scanned.removeprefix(USERS_IN)]
    return SCAN_KEYS[scanned]


def after_key(names: Sequence[str], values: Sequence[Any] | None) -> Doc:
    """Filter of the documents whose key (fields ``names``, in order) sorts after ``values``."""
    if values is None:
        return {}
    clauses = []
    for position, name in enumerate(names):
        clause: Doc = dict(zip(names[:position], values[:position], strict=True))
        clause[name] = {"$gt": values[position]}
        clauses.append(clause)
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def scan(scanned: str, after: Sequence[Any] | None, limit: int) -> Find:
    """The next ``limit`` documents in key order after key ``after``.

    scanned: a collection, or ``USERS_IN`` + a data collection for its user documents.
    """
    names = _scan_keys(scanned)
    collection = scanned.removeprefix(USERS_IN)
    where = after_key(names, after)
    if scanned.startswith(USERS_IN):
        where = {"$and": [UserDocs.ONLY, where]} if where else dict(UserDocs.ONLY)
    elif collection in DATA_ONLY:
        where = {"$and": [DATA_ONLY[collection], where]} if where else dict(DATA_ONLY[collection])
    if collection == ROWS:
        return Find(where, None, [("_id", 1)], limit)
    return Find(where, {"_id": 0}, [(name, 1) for name in names], limit)


def key_of(document: Doc, scanned: str) -> list[Any]:
    """The scan key of a document of scanned (dotted names reach into _id)."""
    values = []
    for name in _scan_keys(scanned):
        value: Any = document
        for part in name.split("."):
            value = value[part]
        values.append(value)
    return values
