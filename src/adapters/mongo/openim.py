"""A database OpenIM wrote, opened as it is: ``msg``, ``seq`` and ``seq_user`` (docs/openim.md).

Nothing is converted. Slots are read the way OpenIM reads them: ``{msg: null}`` alone
(OpenIM's physical delete) is a purged slot, every other slot keeps OpenIM's four keys. The
allocated maximum of a conversation is OpenIM's Redis hash ``MALLOC_SEQ:<conversation>``
(field ``CURR``) when OpenIM's Redis is given; else the seq of its newest stored message
(``seq.max_seq`` is only OpenIM's reservation ceiling). ``seq_user.max_seq`` caps what a
member who left sees.

Read-only unless opened with writes (``openim_writes=true``, which needs OpenIM's Redis):
then every write is one OpenIM itself makes, in its shape (``openim_writes``), seqs come from
OpenIM's allocator, and OpenIM's cached copies of what changed are deleted. What OpenIM has
no place for (send claims, early readers, spilled deleters) raises ``OpenimIncompatible``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pymongo import ASCENDING, IndexModel, ReturnDocument

from imbucket.adapters.codec import conversation_of, message_from_doc, revoke_from_doc
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo import openim_writes as writes
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.mongo.msg_collection import MsgCollection
from imbucket.adapters.mongo.openim_writes import OpenimAllocator, OpenimRedis
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import ConfigError, OpenimIncompatible
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    PURGED_SLOT,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    TableStats,
    Watermarks,
    stored_slot,
)
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs
from imbucket.ports.bucket_repository import Spilled, Viewed

Doc = dict[str, Any]

OPENIM_LAYOUT = BucketLayout(100, "openim")  # OpenIM's singleGocMsgNum, baked into its doc_ids
SEQS = "seq"
USER_SEQS = "seq_user"
READ_ONLY = (
    "the openim-mongo store is read-only; openim_writes=true on its URL writes as OpenIM does "
    "(docs/openim.md)"
)
REDIS_PARAMETER = "openim_redis"
WRITES_PARAMETER = "openim_writes"
# OpenIM's indexes, created by OpenIM at start-up and by a writing store when missing.
INDEXES = {
    commands.BUCKETS: IndexModel([("doc_id", ASCENDING)], unique=True),
    SEQS: IndexModel([("conversation_id", ASCENDING)]),
    USER_SEQS: IndexModel([("user_id", ASCENDING), ("conversation_id", ASCENDING)]),
}


@dataclass(frozen=True, slots=True)
class OpenimUrl:
    """A store URL taken apart: the MongoDB URL, OpenIM's Redis URL ("" if none), writes."""

    mongo: str
    redis: str
    writes: bool


def split_url(url: str) -> OpenimUrl:
    """The MongoDB URL without the ``openim_redis`` and ``openim_writes`` query parameters.

    ``openim_redis`` is the Redis holding OpenIM's allocator and caches; ``openim_writes``
    is ``true`` or ``false`` (the default). Writes without Redis are a ConfigError: OpenIM
    allocates seqs and caches messages there, so a write made without it would collide
    with OpenIM's next seqs or stay hidden behind its cache.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    found = {name: value for name, value in query if name in (REDIS_PARAMETER, WRITES_PARAMETER)}
    kept = urlencode([(n, v) for n, v in query if n not in (REDIS_PARAMETER, WRITES_PARAMETER)])
    flag = found.get(WRITES_PARAMETER, "false").lower()
    if flag not in ("true", "false"):
        raise ConfigError(f"{WRITES_PARAMETER} must be true or false, not {flag!r}")
    redis = found.get(REDIS_PARAMETER, "")
    if flag == "true" and not redis:
        raise ConfigError(
            f"{WRITES_PARAMETER}=true needs {REDIS_PARAMETER}=<OpenIM's Redis URL> on the store "
            "URL: OpenIM allocates seqs and caches messages there (docs/openim.md)"
        )
    return OpenimUrl(urlunsplit(parts._replace(query=kept)), redis, flag == "true")


def ensure_indexes(connection: MongoConnection) -> None:
    """Create OpenIM's indexes where missing (what OpenIM does at start-up)."""
    for name, index in INDEXES.items():
        with translated(f"create OpenIM's index on {name}"):
            connection.collection(name).create_indexes([index])


def refuse(what: str) -> NoReturn:
    """Raise OpenimIncompatible for what."""
    raise OpenimIncompatible(f"{what}: {READ_ONLY}")


def refuse_spill() -> NoReturn:
    """Raise OpenimIncompatible for a deleter beyond the budget."""
    raise OpenimIncompatible(
        "deleting for a user beyond the store's deleter budget: OpenIM keeps every deleter "
        "in the slot and has no side table (docs/openim.md)"
    )


def refuse_foreign(patches: Mapping[int, SlotPatch]) -> None:
    """OpenimIncompatible if a patch needs a key OpenIM does not have (before any write)."""
    if any(p.mark_spilled for p in patches.values()):
        refuse_spill()
    if any(p.add_read_by is not None for p in patches.values()):
        raise OpenimIncompatible(
            "marking read a message not stored yet: OpenIM keeps no early readers (docs/openim.md)"
        )


def patch_command(
    doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None
) -> tuple[Doc, Doc]:
    """(filter, update) writing patches as OpenIM writes tags, within budget.

    The filter holds while no slot gaining a tag is purged and, with a budget, while the
    deleters stay within it (``$expr`` over the array sizes, as mongo-bucket does).
    """
    condition: Doc = {"doc_id": doc_id}
    sets: Doc = {}
    adds: Doc = {}
    for index, patch in patches.items():
        if patch.purge:
            sets[f"msgs.{index}"] = dict(writes.PURGED)
            continue
        condition.update(writes.not_purged(index))
        if patch.set_read:
            sets[f"msgs.{index}.is_read"] = True
        if patch.add_deleted_by is not None:
            adds[f"msgs.{index}.del_list"] = patch.add_deleted_by
    within = [] if budget is None else _within(budget, patches)
    if within:
        condition["$expr"] = {"$and": within}
    update = {name: value for name, value in (("$set", sets), ("$addToSet", adds)) if value}
    return condition, update


def _within(budget: TagBudget, patches: Mapping[int, SlotPatch]) -> list[Doc]:
    """The budget's deleter conditions as ``$expr`` terms (OpenIM has no early readers)."""
    deleting = budget.conditions(patches).deleting
    if not deleting:
        return []

    def size(of: Any) -> Doc:
        return {"$size": {"$ifNull": [of, []]}}

    def deleters(index: int) -> Doc:
        element = {"$arrayElemAt": ["$msgs", index]}
        return {"$let": {"vars": {"slot": element}, "in": size("$$slot.del_list")}}

    slot = [{"$lt": [deleters(i), budget.deleters_per_slot]} for i in deleting]
    every = {"$map": {"input": "$msgs", "as": "s", "in": size("$$s.del_list")}}
    total = {"$lte": [{"$add": [{"$sum": every}, len(deleting)]}, budget.deleters_per_bucket]}
    return [*slot, total]


def openim_slot(conversation_id: str, doc: Doc | None) -> Slot:
    """A slot as OpenIM stored it: ``{msg: null}`` without its other keys is purged."""
    if not doc:
        return EMPTY_SLOT
    msg, revoke = doc.get("msg"), doc.get("revoke")
    if msg is None and "is_read" not in doc and "revoke" not in doc:
        return PURGED_SLOT
    deleted = doc.get("del_list")
    return stored_slot(
        None if msg is None else message_from_doc(conversation_id, msg),
        None if revoke is None else revoke_from_doc(revoke),
        frozenset(deleted) if deleted else frozenset(),
        bool(doc.get("is_read")),
    )


def _slots(wanted: Mapping[str, Sequence[int]], found: list[Doc]) -> dict[str, list[Doc]]:
    return {doc["doc_id"]: doc["msgs"] for doc in found if doc["doc_id"] in wanted}


class OpenimBucketRepository(MsgCollection):
    """BucketRepository over OpenIM's ``msg`` (see the module docstring).

    side: OpenIM's Redis when writing (None: read-only), whose message cache each tag
    write clears for the slots it changed.
    """

    layout = OPENIM_LAYOUT
    decode_slot = staticmethod(openim_slot)

    def __init__(self, connection: MongoConnection, side: OpenimAllocator | None = None) -> None:
        self._connection = connection
        self._side = side
        self._buckets = connection.collection(commands.BUCKETS)

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """One aggregate projecting the wanted slots (``commands.read_buckets``)."""
        if not wanted:
            return {}
        with translated("read buckets"):
            found = list(self._buckets.aggregate(commands.read_buckets(wanted)))
        return {
            doc_id: {
                index: openim_slot(conversation_of(doc_id), slot)
                for index, slot in zip(wanted[doc_id], slots, strict=True)
            }
            for doc_id, slots in _slots(wanted, found).items()
        }

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """``read`` with the viewer's deleters computed by the engine."""
        if not wanted:
            return {}
        with translated("read buckets"):
            found = list(self._buckets.aggregate(commands.read_buckets(wanted, viewer)))
        viewed: dict[str, dict[int, Viewed]] = {}
        for doc_id, slots in _slots(wanted, found).items():
            conversation_id = conversation_of(doc_id)
            viewed[doc_id] = {
                index: (openim_slot(conversation_id, slot), int(slot.get("del_count") or 0))
                for index, slot in zip(wanted[doc_id], slots, strict=True)
            }
        return viewed

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """None: OpenIM keeps every deleter inline."""
        return {}

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """``$set msgs.<i>.msg`` for every slot, matching only if all of them are free.

        A slot OpenIM purged (``{msg: null}``) is not free: imbucket's purge is final.
        """
        self._writable("storing messages")
        if not messages:
            return self._exists(doc_id)
        condition: Doc = {"doc_id": doc_id}
        for index in messages:
            condition[f"msgs.{index}.msg"] = {"$type": "null"}
            condition.update(writes.not_purged(index))
        update = {"$set": {f"msgs.{i}.msg": writes.message_doc(m) for i, m in messages.items()}}
        return self._update(condition, update, "write messages")

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """insert_one of OpenIM's whole bucket; a duplicate doc_id means another writer won."""
        self._writable("storing messages")
        return self._insert_bucket(writes.new_bucket(doc_id, slots, self.layout.size))

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """Unordered insert_many; the duplicate doc_ids reported existed."""
        self._writable("storing messages")
        doc_ids = list(buckets)
        documents = [writes.new_bucket(d, buckets[d], self.layout.size) for d in doc_ids]
        return self._insert_buckets(doc_ids, documents)

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """``$set msgs.<i>.revoke`` iff the slot holds no revoke and is not purged."""
        self._writable("revoking")
        condition = {"doc_id": doc_id, f"msgs.{slot}.revoke": {"$type": "null"}}
        update = {"$set": {f"msgs.{slot}.revoke": writes.revoke_doc(revoke)}}
        written = self._update(condition, update, "revoke")
        self._forget(doc_id, [slot])
        return written

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """One update_one as OpenIM writes tags; purged slots are spared (read, retried).

        Delete-for-me is ``$addToSet msgs.<i>.del_list``, mark-read ``$set msgs.<i>.is_read``,
        purge ``$set msgs.<i>: {msg: null}``. An early reader or a spilling deleter is
        refused (OpenimIncompatible) before anything is written.
        """
        self._writable("writing tags")
        refuse_foreign(patches)

        def update(some: Mapping[int, SlotPatch]) -> bool:
            if not self._update(*patch_command(doc_id, some, budget), "write tags"):
                return False
            self._forget(doc_id, list(some))
            return True

        return self._patch_sparing_purged(doc_id, patches, update)

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """``patch`` of each bucket, after checking that none needs what OpenIM lacks."""
        self._writable("writing tags")
        if spills:
            refuse_spill()
        for slots in patches.values():
            refuse_foreign(slots)
        return {doc_id for doc_id, slots in patches.items() if self.patch(doc_id, slots, budget)}

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """Refused: OpenIM has no side table for deleters."""
        refuse_spill()

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """Nothing to drop: no slot is ever flagged as spilled here."""

    def _writable(self, what: str) -> None:
        if self._side is None:
            refuse(what)

    def _update(self, condition: Doc, update: Doc, action: str) -> bool:
        with translated(action):
            return self._buckets.update_one(condition, update).matched_count == 1

    def _forget(self, doc_id: str, indexes: Sequence[int]) -> None:
        """Delete OpenIM's cached copies of the slots (``MSG_CACHE:<conversation>:<seq>``)."""
        if self._side is not None:
            conversation_id, number = doc_id.rsplit(":", 1)
            first = int(number) * self.layout.size + 1
            self._side.forget(*(f"{writes.MESSAGE_CACHE}{conversation_id}:{first + i}"
                                for i in indexes))  # fmt: skip


class OpenimSeqStore:
    """SeqStore over OpenIM's ``seq`` and ``seq_user`` and, when given, its Redis.

    A conversation's max_seq is the allocated maximum (``MALLOC_SEQ``'s CURR), else the
    newest stored message's seq (two round trips plus one per trailing empty bucket); a
    read seq is the higher of ``seq_user.read_seq`` and OpenIM's cached one. With writes,
    seqs come from OpenIM's allocator (``OpenimAllocator``) and floors and read seqs are
    written as OpenIM's upserts write them, raising only.
    """

    def __init__(
        self, connection: MongoConnection, redis: OpenimRedis | None = None, writes: bool = False
    ) -> None:
        self._connection = connection
        self._redis = redis
        self._seqs = connection.collection(SEQS)
        self._users = connection.collection(USER_SEQS)
        self._buckets = connection.collection(commands.BUCKETS)
        self._side = None if redis is None else OpenimAllocator(redis, self._seqs)
        self._writes = writes

    def max_seq(self, conversation_id: str) -> int:
        """The allocated maximum (see the class docstring)."""
        if self._redis is not None:
            current = self._redis.hget(writes.MALLOC_SEQ + conversation_id, "CURR")
            if current is not None:
                return int(current)
        return self._newest_stored(conversation_id)

    def _newest_stored(self, conversation_id: str) -> int:
        """The seq of the newest message stored: the highest-indexed bucket holding one."""
        prefix = {"doc_id": {"$regex": f"^{re.escape(conversation_id)}:[0-9]+$"}}
        with translated("list a conversation's buckets"):
            doc_ids = [doc["doc_id"] for doc in self._buckets.find(prefix, {"doc_id": 1})]
        for doc_id in sorted(doc_ids, key=lambda d: int(d.rsplit(":", 1)[1]), reverse=True):
            with translated("read a bucket's seqs"):
                found = self._buckets.find_one({"doc_id": doc_id}, {"msgs.msg.seq": 1})
            seqs = [int(s["msg"]["seq"]) for s in (found or {}).get("msgs", []) if s.get("msg")]
            if seqs:
                return max(seqs)
        return 0

    def min_seq(self, conversation_id: str) -> int:
        """``seq.min_seq`` (the highest, should OpenIM's non-unique index let two exist)."""
        with translated("read the conversation floor"):
            found = self._seqs.find({"conversation_id": conversation_id}, {"min_seq": 1})
            return max((int(doc.get("min_seq") or 0) for doc in found), default=0)

    def _user(self, conversation_id: str, user_id: str) -> Doc:
        with translated("read user watermarks"):
            found = self._users.find_one({"user_id": user_id, "conversation_id": conversation_id})
        return found or {}

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """``seq_user.min_seq``."""
        return int(self._user(conversation_id, user_id).get("min_seq") or 0)

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """``seq_user.read_seq``, or OpenIM's newer one in Redis ``SEQ_USER_READ``."""
        return self._read(conversation_id, user_id, self._user(conversation_id, user_id))

    def _read(self, conversation_id: str, user_id: str, user: Doc) -> int:
        stored = int(user.get("read_seq") or 0)
        if self._side is None:
            return stored
        return max(stored, self._side.cached_read(conversation_id, user_id))

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """max_seq, min_seq and the user's floor and ceiling."""
        user = self._user(conversation_id, user_id)
        return Watermarks(
            self.max_seq(conversation_id),
            self.min_seq(conversation_id),
            int(user.get("min_seq") or 0),
            int(user.get("max_seq") or 0),
        )

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """max_seq and min_seq of each conversation given."""
        return {c: Counters(c, self.max_seq(c), self.min_seq(c)) for c in conversation_ids}

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """The clear floor and read seq of each (conversation_id, user_id) given."""
        found = {}
        for c, u in keys:
            user = self._user(c, u)
            found[c, u] = UserSeqs(
                c, u, int(user.get("min_seq") or 0), self._read(c, u, user),
                int(user.get("max_seq") or 0),
            )  # fmt: skip
        return found

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """A page of ``seq`` in conversation_id order, each with its allocated maximum."""
        where = {} if after is None else {"conversation_id": {"$gt": json.loads(after)}}
        with translated("scan seq"):
            found = list(self._seqs.find(where).sort("conversation_id", 1).limit(limit))
        rows = [
            Counters(d["conversation_id"], self.max_seq(d["conversation_id"]),
                     int(d.get("min_seq") or 0))
            for d in found
        ]  # fmt: skip
        cursor = json.dumps(found[-1]["conversation_id"]) if len(found) == limit else None
        return SeqPage(tuple(rows), cursor)

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """A page of ``seq_user`` in (conversation_id, user_id) order."""
        where: Doc = {}
        if after is not None:
            conversation_id, user_id = json.loads(after)
            where = {"$or": [
                {"conversation_id": {"$gt": conversation_id}},
                {"conversation_id": conversation_id, "user_id": {"$gt": user_id}},
            ]}  # fmt: skip
        order = [("conversation_id", 1), ("user_id", 1)]
        with translated("scan seq_user"):
            found = list(self._users.find(where).sort(order).limit(limit))
        rows = [
            UserSeqs(d["conversation_id"], d["user_id"], int(d.get("min_seq") or 0),
                     self._read(d["conversation_id"], d["user_id"], d), int(d.get("max_seq") or 0))
            for d in found
        ]  # fmt: skip
        last = found[-1] if len(found) == limit else None
        cursor = None if last is None else json.dumps([last["conversation_id"], last["user_id"]])
        return SeqPage(tuple(rows), cursor)

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """None: OpenIM records no send claims."""
        return SeqPage((), None)

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """None: OpenIM records no send claims (no idempotent send on its layout)."""
        return {}

    def send_claims(self) -> TableStats:
        """None kept."""
        return TableStats(0, 0)

    def prune_sends(self, before: int, limit: int) -> int:
        """Nothing to prune."""
        return 0

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Refused: OpenIM keeps no client_msg_id claims."""
        raise OpenimIncompatible(
            "claiming client_msg_ids: OpenIM keeps no send claims (docs/openim.md)"
        )

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """New consecutive seqs in the order given, with no claim kept (none in OpenIM).

        A retry of a client_msg_id therefore gets another seq: sends are not idempotent on
        OpenIM's layout (docs/openim.md).
        """
        first = self.allocate(conversation_id, len(client_msg_ids))
        return {client_msg_id: first + n for n, client_msg_id in enumerate(client_msg_ids)}

    def allocate(self, conversation_id: str, n: int) -> int:
        """Take n seqs from OpenIM's allocator; returns the first."""
        return self._allocator("allocating seqs").take(conversation_id, n).before + 1

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise OpenIM's CURR (and, past its reserve, ``seq.max_seq``) to at least seq."""
        return self._allocator("raising max_seq").take(conversation_id, 0, floor=seq).current

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """``seq.min_seq`` raised to seq (OpenIM's SetMinSeq, never lowering)."""
        side = self._allocator("clearing history")
        found = self._raise(self._seqs, {"conversation_id": conversation_id},
                            writes.counter_upsert("min_seq", seq, ("max_seq",)))  # fmt: skip
        side.forget(writes.MIN_SEQ_CACHE + conversation_id)
        return int(found["min_seq"])

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """``seq_user.min_seq`` raised to seq (OpenIM's SetUserMinSeq, never lowering)."""
        side = self._allocator("clearing history")
        others = ("max_seq", "read_seq")
        found = self._raise(self._users, {"user_id": user_id, "conversation_id": conversation_id},
                            writes.counter_upsert("min_seq", seq, others))  # fmt: skip
        side.forget(f"{writes.USER_MIN_CACHE}{conversation_id}:{user_id}")
        return int(found["min_seq"])

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """``seq_user.read_seq`` raised to seq, and OpenIM's cached read seq when it is lower."""
        side = self._allocator("raising a read seq")
        others = ("min_seq", "max_seq")
        found = self._raise(self._users, {"user_id": user_id, "conversation_id": conversation_id},
                            writes.counter_upsert("read_seq", seq, others))  # fmt: skip
        side.raise_cached_read(conversation_id, user_id, seq)
        return self._read(conversation_id, user_id, found)

    def _allocator(self, what: str) -> OpenimAllocator:
        if not self._writes or self._side is None:
            refuse(what)
        return self._side

    def _raise(self, collection: Any, key: Doc, update: Doc) -> Doc:
        with translated("raise a counter"):
            found: Doc = collection.find_one_and_update(
                key, update, upsert=True, return_document=ReturnDocument.AFTER
            )
        return found

    def batch(self) -> AbstractContextManager[None]:
        """Writes are refused: nothing to group."""
        return nullcontext()

    def close(self) -> None:
        """Release the Redis client (the Mongo client is the store's)."""
        if self._redis is not None and hasattr(self._redis, "close"):
            self._redis.close()
