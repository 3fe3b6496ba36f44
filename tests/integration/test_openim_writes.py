"""openim-mongo with openim_writes=true: every use case, written exactly as OpenIM writes it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient

from imbucket.app import MessageService, open_service
from imbucket.domain.errors import ConfigError, OpenimIncompatible
from imbucket.domain.model import Actor, Draft, Role, SessionType
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from tests import openim_fixture
from tests.openim_fixture import INT32, INT64, MSG_FIELDS, REVOKE_FIELDS, SLOT_FIELDS, OpenimData
from tests.redis_server import redis_url

SEQ_FIELDS = ("_id", "conversation_id", "max_seq", "min_seq")
SEQ_USER_FIELDS = ("_id", "user_id", "conversation_id", "min_seq", "max_seq", "read_seq")


@pytest.fixture
def openim(mongo_url: str) -> Iterator[tuple[str, Any, OpenimData, Any]]:
    """A database OpenIM wrote, its Redis, and what it holds."""
    import redis

    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url)
    cache = redis.Redis.from_url(redis_url(), decode_responses=True)
    data = openim_fixture.write(client.get_default_database(), cache)
    yield mongo_url, client.get_default_database(), data, cache
    for pattern in ("MALLOC_SEQ:", "MSG_CACHE:", "SEQ_USER_", "MALLOC_MIN_SEQ:"):
        for conversation_id in (data.group, data.single, data.single + "x"):
            keys = list(cache.scan_iter(f"{pattern}*{conversation_id}*"))
            if keys:
                cache.delete(*keys)
    cache.close()
    client.close()


def writing(url: str) -> MessageService:
    separator = "&" if "?" in url else "?"
    store_url = f"{url}{separator}openim_redis={redis_url()}&openim_writes=true"
    return open_service({"store": {"backend": "openim-mongo", "url": store_url}})


def draft(sender: str, n: int, **fields: Any) -> Draft:
    return Draft(sender, f"hi {n}", f"w-{sender}-{n}", session_type=SessionType.GROUP, **fields)


def raw(db: Any, name: str) -> list[RawBSONDocument]:
    options = db.codec_options.with_options(document_class=RawBSONDocument)
    return list(db.get_collection(name).with_options(codec_options=options).find())


def types(doc: RawBSONDocument) -> dict[str, str]:
    """The BSON type of each field, as a name."""
    names = {int: "int32", Int64: "int64", bool: "bool", str: "string", type(None): "null"}
    return {key: names.get(type(value), type(value).__name__) for key, value in doc.items()}


def check_openim_shape(db: Any) -> int:
    """Every document of msg, seq and seq_user as OpenIM's models write them; messages seen."""
    messages = 0
    for doc in raw(db, "msg"):
        assert list(doc.keys()) == ["_id", "doc_id", "msgs"]
        assert type(doc["_id"]).__name__ == "ObjectId"
        assert len(doc["msgs"]) == openim_fixture.SLOTS
        for slot in doc["msgs"]:
            if list(slot.keys()) == ["msg"]:
                assert slot["msg"] is None  # OpenIM's physical delete
                continue
            assert tuple(slot.keys()) == SLOT_FIELDS
            assert isinstance(slot["del_list"], list) and isinstance(slot["is_read"], bool)
            if slot["revoke"] is not None:
                assert tuple(slot["revoke"].keys()) == REVOKE_FIELDS
                assert types(slot["revoke"])["role"] == "int32"
                assert types(slot["revoke"])["time"] == "int64"
            if slot["msg"] is not None:
                messages += 1
                found = types(slot["msg"])
                assert tuple(slot["msg"].keys()) == MSG_FIELDS
                assert {n for n in MSG_FIELDS if found[n] == "int32"} == INT32
                assert {n for n in MSG_FIELDS if found[n] == "int64"} == INT64
    for name, fields in (("seq", SEQ_FIELDS), ("seq_user", SEQ_USER_FIELDS)):
        for doc in raw(db, name):
            assert sorted(doc.keys()) == sorted(fields)
            assert {types(doc)[f] for f in fields[-2:]} <= {"int32", "int64"}
    return messages


def test_writes_keep_every_document_in_openim_s_shape(openim: Any) -> None:
    url, db, data, _ = openim
    indexes = {k: v for k, v in openim_fixture.snapshot(db).items() if "index" in k}
    service = writing(url)
    group, single = data.group, data.single
    sent = service.send(group, [draft("alice", n, group_id="g") for n in range(80)])
    assert [m.seq for m in sent] == list(range(131, 211))  # the third bucket is new
    service.send(single + "x", [Draft("alice", "new chat", "c1", recv_id="bob")])
    assert service.revoke(group, 140, Actor("imAdmin", Role.APP_ADMIN))
    assert service.revoke(group, 141, Actor("carol", Role.ADMIN))
    assert service.delete_for_me(group, [131, 205], "bob") == 2
    assert service.mark_read(single, [4, 5], "bob") == 2
    assert service.purge(group, [150], Actor("olivia", Role.OWNER)) == 1
    service.clear_history(group, "carol")
    service.clear_history(single, "newcomer")
    [fifth] = service.pull(single, "alice", [5])
    assert isinstance(fifth, MessageView)
    service.ingest(single, [replace(fifth.message, seq=60, client_msg_id="c-60")])
    service.close()
    # The group's 129 stored, 80 sent, one purged; the 1:1's 5 and one ingested; a new chat.
    assert check_openim_shape(db) == 129 + 80 - 1 + 5 + 1 + 1
    after = openim_fixture.snapshot(db)
    assert {k: v for k, v in after.items() if "index" in k} == indexes
    assert after["collections"] == ["msg", "seq", "seq_user"]
    slot = db["msg"].find_one({"doc_id": f"{group}:1"})["msgs"][39]
    assert slot["revoke"]["role"] == 0  # OpenIM's role of an app admin's revoke


def test_seqs_come_from_openim_s_allocator(openim: Any) -> None:
    url, db, data, cache = openim
    service = writing(url)
    # The group's hash holds CURR 130 of LAST 200: 80 more refill it by 80 + 100 in seq.
    service.send(data.group, [draft("alice", n, group_id="g") for n in range(80)])
    assert cache.hgetall(f"MALLOC_SEQ:{data.group}") | {"TIME": "-"} == {
        "CURR": "210", "LAST": "380", "TIME": "-"
    }  # fmt: skip
    assert db["seq"].find_one({"conversation_id": data.group})["max_seq"] == 380
    # An expired hash resumes at seq's ceiling (55), reserving 1 + 50, as OpenIM does.
    cache.delete(f"MALLOC_SEQ:{data.single}")
    [message] = service.send(data.single, [Draft("alice", "x", "c-x", recv_id="bob")])
    assert message.seq == 56
    assert cache.hget(f"MALLOC_SEQ:{data.single}", "LAST") == "106"
    assert service.max_seq(data.single) == 56
    # A conversation OpenIM never saw: its seq document is made by the same upsert.
    service.send(data.group + "n", [draft("bob", 1, group_id="g")])
    made = db["seq"].find_one({"conversation_id": data.group + "n"}, {"_id": 0})
    assert made == {"conversation_id": data.group + "n", "max_seq": 101, "min_seq": 0}
    assert service.max_seq(data.group + "n") == 1
    service.close()
    check_openim_shape(db)


def test_every_viewer_sees_openim_s_semantics_after_writes(openim: Any) -> None:
    url, db, data, cache = openim
    service = writing(url)
    group = data.group
    service.delete_for_me(group, [20], "carol")
    service.purge(group, [21], Actor("olivia", Role.OWNER))
    service.clear_history(group, "alice")
    service.mark_read(data.single, [5], "bob")
    assert shown(service.pull(group, "carol", [20, 21, 22])) == [
        (20, TombstoneReason.DELETED), (21, TombstoneReason.PURGED), (22, "text 22"),
    ]  # fmt: skip
    assert shown(service.pull(group, "bob", [20])) == [(20, "text 20")]
    assert service.pull_latest(group, "alice", 1) == []  # cleared up to 130
    user = db["seq_user"].find_one({"user_id": "alice", "conversation_id": group}, {"_id": 0})
    assert user == {"user_id": "alice", "conversation_id": group, "min_seq": 131,
                    "max_seq": 0, "read_seq": 0}  # fmt: skip
    assert (
        db["seq_user"].find_one({"user_id": "bob", "conversation_id": data.single})["read_seq"] == 5
    )
    # OpenIM's newer read seq in Redis is raised, never lowered, and read.
    cache.hset(f"SEQ_USER_READ:{group}:carol", "value", "70")
    assert service.mark_read(group, [60], "carol") == 1
    assert service.seqs.read_seq(group, "carol") == 70
    service.clear_for_everyone(group, Actor("olivia", Role.OWNER))
    assert db["seq"].find_one({"conversation_id": group})["min_seq"] == 131
    assert service.pull_latest(group, "bob", 1) == []
    # dave left at 100: what the others send later stays beyond his ceiling.
    service.send(group, [draft("alice", 1, group_id="g")])
    assert shown(service.pull(group, "dave", [131])) == [(131, TombstoneReason.UNALLOCATED)]
    service.close()
    check_openim_shape(db)


def shown(entries: list[Any]) -> list[Any]:
    return [
        (e.seq, e.reason)
        if isinstance(e, Tombstone)
        else (e.seq, e.message.content.removeprefix('{"content":"').removesuffix('"}'))
        for e in entries
        if isinstance(e, Tombstone | MessageView)
    ]


def test_what_openim_cannot_keep_is_refused_and_changes_nothing(openim: Any) -> None:
    url, db, data, cache = openim
    service = writing(url)
    cache.hset(f"MALLOC_SEQ:{data.group}", "CURR", 135)  # allocated, not stored yet
    before = openim_fixture.snapshot(db)
    with pytest.raises(OpenimIncompatible, match="early readers"):
        service.mark_read(data.group, [120, 133], "bob")
    with pytest.raises(OpenimIncompatible, match="send claims"):
        service.seqs.claim_sends(data.group, {"c": 131})
    assert openim_fixture.snapshot(db) == before
    # No claims: a retried client_msg_id is a second message, as in OpenIM.
    first = service.send(data.single, [Draft("alice", "x", "same", recv_id="bob")])
    again = service.send(data.single, [Draft("alice", "x", "same", recv_id="bob")])
    assert again[0].seq == first[0].seq + 1
    service.close()


def test_writes_need_openim_s_redis(mongo_url: str) -> None:
    separator = "&" if "?" in mongo_url else "?"
    store = {"backend": "openim-mongo", "url": f"{mongo_url}{separator}openim_writes=true"}
    with pytest.raises(ConfigError, match="openim_redis"):
        open_service({"store": store})
    with pytest.raises(ConfigError, match="true or false"):
        open_service({"store": {**store, "url": f"{mongo_url}{separator}openim_writes=yes"}})
