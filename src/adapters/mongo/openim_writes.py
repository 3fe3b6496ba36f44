"""What the openim-mongo store writes, in the exact shape OpenIM's Go driver writes it.

Documents: a message is OpenIM's ``MsgDataModel`` (every field in struct order, int32 and int64
where Go has them, empty maps and slices as null), a revoke its ``RevokeModel``, a slot
``{msg, revoke, del_list, is_read}`` and a purged slot ``{msg: null}``. Counters follow
OpenIM's upserts: the field written is int64, the fields a new document gets are int32 0.

Seqs: OpenIM's allocator lives in the Redis hash ``MALLOC_SEQ:<conversation>`` (``CURR``
allocated, ``LAST`` reserved, ``TIME``, ``LOCK`` while a refill runs) backed by ``seq.max_seq``,
which each refill raises by the seqs wanted plus a reserve (100 in groups, 50 otherwise).
``OpenimAllocator`` follows that protocol step by step, so that OpenIM and imbucket can
allocate in the same conversation without handing out a seq twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bson.int64 import Int64
from pymongo import ReturnDocument

from imbucket.adapters.codec import message_to_doc
from imbucket.domain.errors import OpenimIncompatible, StoreUnavailable
from imbucket.domain.model import Message, Revoke, Role, Slot

Doc = dict[str, Any]

# MsgDataModel's fields in struct order, and the ones Go declares int32 / int64.
MESSAGE_FIELDS = (
    "send_id", "recv_id", "group_id", "client_msg_id", "server_msg_id", "sender_platform_id",
    "sender_nickname", "sender_face_url", "session_type", "msg_from", "content_type", "content",
    "seq", "send_time", "create_time", "status", "is_read", "options", "offline_push",
    "at_user_id_list", "attached_info", "ex",
)  # fmt: skip
INT32_FIELDS = ("sender_platform_id", "session_type", "msg_from", "content_type", "status")
INT64_FIELDS = ("seq", "send_time", "create_time")
INT32 = range(-(2**31), 2**31)
PURGED = {"msg": None}  # what OpenIM's physical delete leaves in a slot
APP_ADMIN_ROLE = 0  # the role OpenIM records for an app admin's revoke

MALLOC_SEQ = "MALLOC_SEQ:"  # OpenIM's cache keys, followed by the conversation id
MESSAGE_CACHE = "MSG_CACHE:"  # + conversation id + ":" + seq
MIN_SEQ_CACHE = "MALLOC_MIN_SEQ:"  # + conversation id
USER_MIN_CACHE = "SEQ_USER_MIN:"  # + conversation id + ":" + user id
USER_READ_CACHE = "SEQ_USER_READ:"  # + conversation id + ":" + user id, field "value"
GROUP_PREFIXES = ("g_", "sg_")  # OpenIM's group conversation ids
LOCK_SECONDS = 3
DATA_SECONDS = 365 * 24 * 3600
LOCK_WAIT_SECONDS = 0.25
LOCK_ATTEMPTS = 10


def message_doc(message: Message) -> Doc:
    """The message as OpenIM stores it (OpenimIncompatible for an int32 field beyond int32)."""
    plain = message_to_doc(message)
    doc = {name: plain[name] for name in MESSAGE_FIELDS}
    for name in INT32_FIELDS:
        if doc[name] not in INT32:
            raise OpenimIncompatible(f"{name} {doc[name]} does not fit OpenIM's int32")
    for name in INT64_FIELDS:
        doc[name] = Int64(doc[name])
    doc["options"] = doc["options"] or None
    doc["at_user_id_list"] = doc["at_user_id_list"] or None
    return doc


def revoke_doc(revoke: Revoke) -> Doc:
    """OpenIM's RevokeModel: role (int32), user_id, nickname, time (int64).

    An app admin's revoke gets OpenIM's role for it, 0; every other role is kept.
    """
    role = APP_ADMIN_ROLE if revoke.role == Role.APP_ADMIN else int(revoke.role)
    if role not in INT32:
        raise OpenimIncompatible(f"revoke role {role} does not fit OpenIM's int32")
    return {
        "role": role,
        "user_id": revoke.user_id,
        "nickname": revoke.nickname,
        "time": Int64(revoke.time),
    }


def slot_doc(slot: Slot) -> Doc:
    """A slot as OpenIM writes it; OpenimIncompatible for what OpenIM has no place for."""
    if slot.purged:
        return dict(PURGED)
    if slot.read_by:
        raise OpenimIncompatible(
            "marking read a message not stored yet: OpenIM keeps no early readers"
        )
    if slot.spilled:
        raise OpenimIncompatible("a deleter beyond the store's budget: OpenIM has no side table")
    return {
        "msg": None if slot.message is None else message_doc(slot.message),
        "revoke": None if slot.revoke is None else revoke_doc(slot.revoke),
        "del_list": sorted(slot.deleted_by),
        "is_read": slot.is_read,
    }


def new_bucket(doc_id: str, slots: Mapping[int, Slot], size: int) -> Doc:
    """A MsgDocModel: every slot written, the empty ones as OpenIM fills them."""
    return {"doc_id": doc_id, "msgs": [slot_doc(slots.get(i, Slot())) for i in range(size)]}


def not_purged(index: int) -> Doc:
    """Filter terms holding while slot index is not OpenIM's ``{msg: null}``."""
    return {f"msgs.{index}.is_read": {"$exists": True}}


def counter_upsert(field: str, value: int, others: tuple[str, ...]) -> Doc:
    """OpenIM's setSeq upsert, raising: field to at least value (int64), others int32 0."""
    return {"$max": {field: Int64(value)}, "$setOnInsert": dict.fromkeys(others, 0)}


def is_group(conversation_id: str) -> bool:
    """Whether OpenIM treats conversation_id as a group's (its reserve is larger)."""
    return conversation_id.startswith(GROUP_PREFIXES)


class OpenimRedis(Protocol):
    """The part of a Redis client (decoding responses) the openim-mongo store uses."""

    def hget(self, name: str, key: str) -> Any:
        """The value of field key of hash name, None when absent."""
        ...

    def delete(self, *names: str) -> Any:
        """Delete keys."""
        ...

    def register_script(self, script: str) -> Any:
        """A callable running script with keys and args."""
        ...


# Takes the next seqs, or locks the hash for a refill (OpenIM's malloc, with a floor for the
# ingest path). Reply: {0, curr} taken; {1, lock} no hash; {2} locked; {3, curr, last, lock}.
_MALLOC = """
local key, size, floor = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local lock, now = ARGV[3], ARGV[4]
if redis.call("EXISTS", key) == 0 then
  redis.call("HSET", key, "LOCK", lock)
  redis.call("EXPIRE", key, ARGV[5])
  return {1, lock}
end
if redis.call("HEXISTS", key, "LOCK") == 1 then return {2} end
local curr = tonumber(redis.call("HGET", key, "CURR"))
local last = tonumber(redis.call("HGET", key, "LAST"))
local wanted = math.max(curr + size, floor)
if wanted > last then
  redis.call("HSET", key, "LOCK", lock, "CURR", last, "TIME", now)
  redis.call("EXPIRE", key, ARGV[5])
  return {3, curr, last, lock}
end
redis.call("HSET", key, "CURR", wanted, "TIME", now)
redis.call("EXPIRE", key, ARGV[6])
return {0, curr}
"""
# Sets CURR and LAST after a refill and releases the lock, if it is still this caller's.
_SET = """
local key = KEYS[1]
if redis.call("EXISTS", key) == 1 then
  if redis.call("HGET", key, "LOCK") ~= ARGV[1] then return 2 end
  redis.call("HDEL", key, "LOCK")
end
redis.call("HSET", key, "CURR", ARGV[2], "LAST", ARGV[3], "TIME", ARGV[4])
redis.call("EXPIRE", key, ARGV[5])
return 0
"""
# Raises OpenIM's cached read seq (a rockscache hash, field "value") if it is there and lower.
_RAISE_READ = """
local held = redis.call("HGET", KEYS[1], "value")
if held and tonumber(held) < tonumber(ARGV[1]) then
  redis.call("HSET", KEYS[1], "value", ARGV[1])
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Taken:
    """An allocation: the seq before the first one handed out, and the new CURR."""

    before: int
    current: int


class OpenimAllocator:
    """OpenIM's seq allocator: Redis ``MALLOC_SEQ`` backed by Mongo ``seq.max_seq``."""

    def __init__(self, redis: OpenimRedis, seqs: Any) -> None:
        self._redis = redis
        self._seqs = seqs  # the ``seq`` collection
        self._malloc = redis.register_script(_MALLOC)
        self._set = redis.register_script(_SET)
        self._raise_read = redis.register_script(_RAISE_READ)

    def take(self, conversation_id: str, size: int, floor: int = 0) -> Taken:
        """Hand out size seqs after CURR, CURR raised to at least floor (the ingest path).

        While another allocator (OpenIM or imbucket) refills, waits LOCK_WAIT_SECONDS a try,
        LOCK_ATTEMPTS tries, then StoreUnavailable.
        """
        key = MALLOC_SEQ + conversation_id
        for _ in range(LOCK_ATTEMPTS):
            lock = str(random.randrange(1_000_000_000))
            now = str(time.time_ns() // 1_000_000)
            args = [size, floor, lock, now, LOCK_SECONDS, DATA_SECONDS]
            state, *rest = (int(v) for v in self._malloc(keys=[key], args=args))
            if state == 0:
                return Taken(rest[0], max(rest[0] + size, floor))
            if state == 2:
                time.sleep(LOCK_WAIT_SECONDS)
                continue
            cached = (rest[0], rest[1]) if state == 3 else None
            return self._refill(conversation_id, key, size, floor, cached, lock, now)
        raise StoreUnavailable(f"{key} stayed locked by another allocator")

    def _refill(
        self,
        conversation_id: str,
        key: str,
        size: int,
        floor: int,
        cached: tuple[int, int] | None,
        lock: str,
        now: str,
    ) -> Taken:
        """Reserve in ``seq`` as OpenIM does, then set the hash and release the lock.

        cached: (CURR, LAST) of the hash, None when it had expired (then ``seq.max_seq``,
        OpenIM's reservation ceiling, is where allocation resumes).
        """
        reserve = size + (100 if is_group(conversation_id) else 50)
        ceiling = self._reserve(conversation_id, {"$inc": {"max_seq": Int64(reserve)}})
        stored = ceiling - reserve
        before = cached[0] if cached is not None and cached[1] == stored else stored
        current = max(before + size, floor)
        if current > ceiling:
            ceiling = self._reserve(
                conversation_id, {"$max": {"max_seq": Int64(current + reserve - size)}}
            )
        self._set(keys=[key], args=[lock, current, ceiling, now, DATA_SECONDS])
        return Taken(before, current)

    def _reserve(self, conversation_id: str, change: Doc) -> int:
        """Apply change to the conversation's ``seq`` (upserting as OpenIM): its max_seq."""
        found = self._seqs.find_one_and_update(
            {"conversation_id": conversation_id},
            {**change, "$setOnInsert": {"min_seq": Int64(0)}},
            projection={"_id": 0, "max_seq": 1},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )
        return int(found["max_seq"])

    def raise_cached_read(self, conversation_id: str, user_id: str, seq: int) -> None:
        """Raise OpenIM's cached read seq, when it holds one, to seq."""
        self._raise_read(keys=[f"{USER_READ_CACHE}{conversation_id}:{user_id}"], args=[seq])

    def cached_read(self, conversation_id: str, user_id: str) -> int:
        """OpenIM's cached read seq (newer than ``seq_user.read_seq``), 0 when none."""
        held = self._redis.hget(f"{USER_READ_CACHE}{conversation_id}:{user_id}", "value")
        return int(held) if held is not None else 0

    def forget(self, *keys: str) -> None:
        """Delete OpenIM's cache entries that a write made stale (OpenIM does the same)."""
        if keys:
            self._redis.delete(*keys)
