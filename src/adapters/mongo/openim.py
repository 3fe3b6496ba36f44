"""A database OpenIM wrote, opened as it is: ``msg``, ``seq`` and ``seq_user`` (docs/openim.md).

Nothing is converted and nothing is created: no index, no layout record, no document.
Slots are read the way OpenIM reads them: ``{msg: null}`` alone (OpenIM's physical delete)
is a purged slot, every other slot keeps OpenIM's four keys. The allocated maximum of a
conversation is OpenIM's Redis hash ``MALLOC_SEQ:<conversation>`` (field ``CURR``) when a
Redis client is given; else the seq of its newest stored message (``seq.max_seq`` is only
OpenIM's reservation ceiling). ``seq_user.max_seq`` caps what a member who left sees.

The store is read-only: every write raises ``OpenimIncompatible``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NoReturn, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from imbucket.adapters.codec import conversation_of, message_from_doc, revoke_from_doc
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.mongo.replies import bucket_bytes, store_stats
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import OpenimIncompatible
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    PURGED_SLOT,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
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
MALLOC_SEQ = "MALLOC_SEQ:"  # OpenIM's cachekey.MallocSeq
READ_ONLY = "the openim-mongo store is read-only (docs/openim.md)"


class Allocated(Protocol):
    """The part of a Redis client this store uses: ``HGET``."""

    def hget(self, name: str, key: str) -> Any:
        """The value of field key of hash name, None when absent."""
        ...


REDIS_PARAMETER = "openim_redis"


def split_redis(url: str) -> tuple[str, str]:
    """The MongoDB URL without its ``openim_redis`` query parameter, and that parameter.

    The parameter ("" when absent) is the Redis that holds OpenIM's ``MALLOC_SEQ`` hashes.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    redis = [value for name, value in query if name == REDIS_PARAMETER]
    kept = urlencode([(name, value) for name, value in query if name != REDIS_PARAMETER])
    return urlunsplit(parts._replace(query=kept)), (redis[-1] if redis else "")


def refuse(what: str) -> NoReturn:
    """Raise OpenimIncompatible for what."""
    raise OpenimIncompatible(f"{what}: {READ_ONLY}")


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


class OpenimBucketRepository:
    """BucketRepository over OpenIM's ``msg``, reading only (see the module docstring)."""

    layout = OPENIM_LAYOUT

    def __init__(self, connection: MongoConnection) -> None:
        self._connection = connection
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

    def scan_buckets(self, after: str | None, limit: int) -> list[tuple[str, list[Slot]]]:
        """One find over ``msg`` in doc_id order (its unique index)."""
        cursor = None if after is None else json.dumps([after])
        found, _ = self._connection.scan(commands.BUCKETS, cursor, limit)
        return [
            (doc["doc_id"], [openim_slot(conversation_of(doc["doc_id"]), s) for s in doc["msgs"]])
            for doc in found
        ]

    def bucket_bytes(self, doc_id: str) -> int | None:
        """``$bsonSize`` of the bucket document."""
        with translated("measure a bucket"):
            return bucket_bytes(self._buckets.aggregate(commands.bucket_size(doc_id)))

    def stats(self) -> StoreStats:
        """``$collStats`` of ``msg`` plus a count of stored messages (a full scan)."""
        with translated("read collection stats"):
            storage = list(self._buckets.aggregate(commands.STORAGE_STATS))
            counted = list(self._buckets.aggregate(commands.COUNT_BUCKET_MESSAGES))
        return store_stats(storage, counted)

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Refused: read-only."""
        refuse("storing messages")

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Refused: read-only."""
        refuse("storing messages")

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """Refused: read-only."""
        refuse("storing messages")

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Refused: read-only."""
        refuse("revoking")

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """Refused: read-only."""
        refuse("writing tags")

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """Refused: read-only."""
        refuse("writing tags")

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """Refused: OpenIM has no side table for deleters."""
        refuse("spilling deleters")

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """Refused: read-only."""
        refuse("purging")

    def close(self) -> None:
        """Close the client."""
        self._connection.close()


class OpenimSeqStore:
    """SeqStore over OpenIM's ``seq`` and ``seq_user`` and, when given, its Redis allocator.

    Reads only; a conversation's max_seq is the allocated maximum (``MALLOC_SEQ``'s CURR),
    else the newest stored message's seq (two round trips plus one per trailing empty bucket).
    """

    def __init__(self, connection: MongoConnection, redis: Allocated | None = None) -> None:
        self._connection = connection
        self._redis = redis
        self._seqs = connection.collection(SEQS)
        self._users = connection.collection(USER_SEQS)
        self._buckets = connection.collection(commands.BUCKETS)

    def max_seq(self, conversation_id: str) -> int:
        """The allocated maximum (see the class docstring)."""
        if self._redis is not None:
            current = self._redis.hget(MALLOC_SEQ + conversation_id, "CURR")
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
        """``seq_user.read_seq`` (OpenIM writes it behind Redis ``SEQ_USER_READ``)."""
        return int(self._user(conversation_id, user_id).get("read_seq") or 0)

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
                c, u, int(user.get("min_seq") or 0), int(user.get("read_seq") or 0)
            )
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
                     int(d.get("read_seq") or 0))
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
        refuse("claiming client_msg_ids")

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Refused: OpenIM allocates seqs itself."""
        refuse("allocating seqs")

    def allocate(self, conversation_id: str, n: int) -> int:
        """Refused: read-only."""
        refuse("allocating seqs")

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Refused: read-only."""
        refuse("raising max_seq")

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Refused: read-only."""
        refuse("clearing history")

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Refused: read-only."""
        refuse("clearing history")

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Refused: read-only."""
        refuse("raising a read seq")

    def batch(self) -> AbstractContextManager[None]:
        """Writes are refused: nothing to group."""
        return nullcontext()

    def close(self) -> None:
        """Release the Redis client (the Mongo client is the store's)."""
        if self._redis is not None and hasattr(self._redis, "close"):
            self._redis.close()
