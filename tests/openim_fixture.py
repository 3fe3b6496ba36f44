"""Documents written the way OpenIM's Go driver encodes its models, for tests.

Built from OpenIM's storage models (``MsgDocModel``, ``MsgInfoModel``, ``MsgDataModel``,
``RevokeModel``, ``OfflinePushModel``, ``SeqConversation``, ``SeqUser``): every field in
struct order, no omitempty, Go ``int32`` as BSON int32 and ``int64`` as BSON int64, nil
pointers, slices and maps as null. A new bucket holds 100 slots, every empty one
``{msg: null, revoke: null, del_list: [], is_read: false}``; a physically deleted slot is
``{msg: null}``. ``seq.max_seq`` is the reservation ceiling and Redis ``MALLOC_SEQ:<conv>``
holds the allocated maximum (``CURR``), as OpenIM's allocator leaves them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from bson.int64 import Int64
from pymongo import ASCENDING, IndexModel
from pymongo.database import Database

Doc = dict[str, Any]
SLOTS = 100
BASE_TIME = 1_720_000_000_000

# OpenIM's field sets, in struct order (pkg/common/storage/model).
MSG_FIELDS = (
    "send_id", "recv_id", "group_id", "client_msg_id", "server_msg_id", "sender_platform_id",
    "sender_nickname", "sender_face_url", "session_type", "msg_from", "content_type", "content",
    "seq", "send_time", "create_time", "status", "is_read", "options", "offline_push",
    "at_user_id_list", "attached_info", "ex",
)  # fmt: skip
INT32 = frozenset({"sender_platform_id", "session_type", "msg_from", "content_type", "status"})
INT64 = frozenset({"seq", "send_time", "create_time"})
SLOT_FIELDS = ("msg", "revoke", "del_list", "is_read")
REVOKE_FIELDS = ("role", "user_id", "nickname", "time")


def msg(seq: int, send_id: str, session_type: int, **fields: Any) -> Doc:
    """A MsgDataModel document: every field, the ones not given at Go's zero value or nil."""
    values: Doc = {
        "send_id": send_id, "recv_id": "", "group_id": "", "client_msg_id": f"c-{seq}",
        "server_msg_id": f"s-{seq}", "sender_platform_id": 1, "sender_nickname": send_id.title(),
        "sender_face_url": f"https://face/{send_id}.png", "session_type": session_type,
        "msg_from": 100, "content_type": 101, "content": f'{{"content":"text {seq}"}}',
        "seq": seq, "send_time": BASE_TIME + seq, "create_time": BASE_TIME + seq,
        "status": 2, "is_read": False, "options": None, "offline_push": None,
        "at_user_id_list": None, "attached_info": "", "ex": "",
    }  # fmt: skip
    values.update(fields)
    for name in INT64:
        values[name] = Int64(values[name])
    return {name: values[name] for name in MSG_FIELDS}


def revoke(role: int, user_id: str, time: int) -> Doc:
    """A RevokeModel document (role int32, time int64)."""
    return {"role": role, "user_id": user_id, "nickname": user_id.title(), "time": Int64(time)}


def empty_slot() -> Doc:
    """What batchInsertBlock fills every slot it does not set with."""
    return {"msg": None, "revoke": None, "del_list": [], "is_read": False}


def bucket(conversation_id: str, index: int, slots: dict[int, Doc]) -> Doc:
    """A MsgDocModel document of 100 slots (the given ones by slot index)."""
    return {
        "doc_id": f"{conversation_id}:{index}",
        "msgs": [slots.get(i, empty_slot()) for i in range(SLOTS)],
    }


@dataclass
class OpenimData:
    """What ``write`` stored: conversation ids, users and the allocated maxima."""

    group: str
    single: str
    allocated: dict[str, int] = field(default_factory=dict)
    ceilings: dict[str, int] = field(default_factory=dict)


def write(db: Database[Doc], redis: Any | None = None) -> OpenimData:
    """A group (130 messages over two buckets) and a 1:1 chat (5), as OpenIM leaves them.

    Group: revokes by an app admin (role 0, seq 5), a group admin (60, seq 6) and the owner
    (100, seq 7); bob deleted seq 8 for himself; seq 9 was physically deleted. bob cleared
    his history up to seq 2 and read to 20; dave left at seq 100. 1:1: bob read seqs 1..3
    (slot is_read), alice revoked seq 4 with her app manager level (1). seq holds the
    reservation ceilings (+100 for groups, +50 otherwise), Redis the allocated maxima.
    """
    tag = uuid.uuid4().hex[:8]
    data = OpenimData(group=f"sg_g{tag}", single=f"si_alice{tag}_bob{tag}")
    data.allocated = {data.group: 130, data.single: 5}
    data.ceilings = {data.group: 200, data.single: 55}
    group, single = data.group, data.single
    slots: dict[int, dict[int, Doc]] = {0: {}, 1: {}}
    for seq in range(1, 131):
        sender = ("alice", "bob", "carol")[seq % 3]
        extra: Doc = {"group_id": f"g{tag}"}
        if seq == 12:
            extra |= {"at_user_id_list": ["bob", "carol"], "options": {"history": True}}
            extra["offline_push"] = {"title": "t", "desc": "d", "ex": "", "ios_push_sound": "",
                                     "ios_badge_count": True}  # fmt: skip
        slot = empty_slot() | {"msg": msg(seq, sender, 3, **extra)}
        slots[(seq - 1) // SLOTS][(seq - 1) % SLOTS] = slot
    for seq, role, who in ((5, 0, "imAdmin"), (6, 60, "carol"), (7, 100, "olivia")):
        slots[0][seq - 1]["revoke"] = revoke(role, who, BASE_TIME + 1000 + seq)
    slots[0][7]["del_list"] = ["bob"]
    slots[0][8] = {"msg": None}
    single_slots = {
        seq - 1: empty_slot() | {"msg": msg(seq, "alice", 1, recv_id="bob"), "is_read": seq <= 3}
        for seq in range(1, 6)
    }
    single_slots[3]["revoke"] = revoke(1, "alice", BASE_TIME + 2000)
    db["msg"].insert_many(
        [bucket(group, 0, slots[0]), bucket(group, 1, slots[1]), bucket(single, 0, single_slots)]
    )
    db["seq"].insert_many(
        [{"conversation_id": c, "max_seq": Int64(m), "min_seq": Int64(0)}
         for c, m in data.ceilings.items()]
    )  # fmt: skip
    db["seq_user"].insert_many([
        _user("bob", group, 3, 0, 20), _user("carol", group, 0, 0, 50),
        _user("dave", group, 0, 100, 90), _user("bob", single, 0, 0, 3),
    ])  # fmt: skip
    create_indexes(db)
    if redis is not None:
        for conversation_id, current in data.allocated.items():
            ceiling = data.ceilings[conversation_id]
            redis.hset(f"MALLOC_SEQ:{conversation_id}",
                       mapping={"CURR": current, "LAST": ceiling, "TIME": BASE_TIME})  # fmt: skip
    return data


def _user(user_id: str, conversation_id: str, min_seq: int, max_seq: int, read: int) -> Doc:
    return {
        "user_id": user_id,
        "conversation_id": conversation_id,
        "min_seq": Int64(min_seq),
        "max_seq": Int64(max_seq),
        "read_seq": Int64(read),
    }


def create_indexes(db: Database[Doc]) -> None:
    """OpenIM's indexes: doc_id unique; conversation_id, (user_id, conversation_id) not."""
    db["msg"].create_indexes([IndexModel([("doc_id", ASCENDING)], unique=True)])
    db["seq"].create_indexes([IndexModel([("conversation_id", ASCENDING)])])
    db["seq_user"].create_indexes(
        [IndexModel([("user_id", ASCENDING), ("conversation_id", ASCENDING)])]
    )


def snapshot(db: Database[Doc]) -> Doc:
    """Every document (with BSON types, read raw) and index of the three collections."""
    from bson.raw_bson import RawBSONDocument

    found: Doc = {}
    for name in ("msg", "seq", "seq_user"):
        raw = db.get_collection(name).with_options(codec_options=db.codec_options.with_options(
            document_class=RawBSONDocument))  # fmt: skip
        found[name] = sorted(bytes(doc.raw) for doc in raw.find())
        found[name + ".indexes"] = sorted(
            (i["name"], tuple(i["key"].items()), bool(i.get("unique")))
            for i in db[name].list_indexes()
        )
    found["collections"] = sorted(db.list_collection_names())
    return found
