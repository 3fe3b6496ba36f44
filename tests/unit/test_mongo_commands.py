"""Pins every command the MongoDB adapters send, document by document.

No MongoDB runs here, so these exact documents are the adapters' specification: a change
to any filter, update, pipeline, index or option must show up as a failure below.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from imbucket.adapters.mongo import commands as c
from imbucket.adapters.timeouts import CALL_BOUND_SECONDS, Timeouts
from imbucket.domain.budget import TagBudget
from imbucket.domain.model import Message, Pick, Revoke, Role, Slot, SlotPatch
from imbucket.testing.factories import message

CONV = "sg_g1"
EMPTY = {
    "msg": None,
    "revoke": None,
    "del_list": [],
    "is_read": False,
    "purged": False,
    "read_by": [],
}
PURGED = {**EMPTY, "purged": True}
REVOKE = Revoke("olivia", Role.OWNER, "Olivia", 1_700_000_000_123)
REVOKE_DOC = {"user_id": "olivia", "role": 100, "nickname": "Olivia", "time": 1_700_000_000_123}


def msg_doc(m: Message) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "send_id": "alice",
        "recv_id": "",
        "group_id": "g1",
        "client_msg_id": f"client-{m.seq}",
        "server_msg_id": f"server-{m.seq}",
        "session_type": 3,
        "content_type": 101,
        "content": f"message {m.seq}",
        "send_time": 1_700_000_000_000 + m.seq,
        "create_time": 1_700_000_000_000 + m.seq,
        "status": 2,
        "sender_nickname": "",
        "sender_platform_id": 0,
        "options": {},
        "ex": "",
        "sender_face_url": "",
        "msg_from": 0,
        "is_read": False,
        "offline_push": None,
        "at_user_id_list": [],
        "attached_info": "",
    }


# ---- schema and client ---------------------------------------------------------------------


def test_collection_names() -> None:
    assert (c.BUCKETS, c.ROWS, c.SEQS, c.META) == ("msg", "msg_row", "seq", "meta")


def test_index_specs_are_unique_keys_and_nothing_inside_msgs() -> None:
    assert {
        "msg": (c.IndexSpec((("doc_id", 1),), unique=True),),
        "msg_row": (),
        "seq": (c.IndexSpec((("conversation_id", 1),), unique=True),),
    } == c.INDEXES


def test_claims_have_a_sparse_claim_time_index_and_a_sparse_ttl_index() -> None:
    # Only claims hold these fields: no bucket or row gets an entry. Each claim carries its
    # own expiry: the TTL monitor deletes it once expire_at passed.
    assert (
        c.IndexSpec((("claimed_at", 1),), unique=False, sparse=True),
        c.IndexSpec((("expire_at", 1),), unique=False, expire_after_seconds=0, sparse=True),
    ) == c.CLAIM_INDEXES
    assert [spec.name for spec in c.CLAIM_INDEXES] == ["claimed_at_1", "expire_at_1"]


def test_rows_are_clustered_on_id_from_mongodb_5_3() -> None:
    clustered = {"clusteredIndex": {"key": {"_id": 1}, "unique": True}}
    assert c.row_collection_options((7, 0, 12)) == clustered
    assert c.row_collection_options((5, 3, 0)) == clustered
    assert c.row_collection_options((5, 2, 1)) == {}
    assert c.row_collection_options((4, 4)) == {}


def test_client_options_bound_every_wait_unless_the_url_says_otherwise() -> None:
    defaults = {
        "serverSelectionTimeoutMS": 2000,
        "connectTimeoutMS": 2000,
        "socketTimeoutMS": 5000,
        "waitQueueTimeoutMS": 2000,
        "appname": "imbucket",
    }
    assert c.client_options("mongodb://db:27017/chat") == defaults
    url = "mongodb://db/chat?serverselectiontimeoutms=500&appName=x&socketTimeoutMS=100"
    assert c.client_options(url) == {"connectTimeoutMS": 2000, "waitQueueTimeoutMS": 2000}
    configured = c.client_options("mongodb://db/chat", Timeouts(connect=1, statement=0.25, pool=3))
    assert configured == {
        "serverSelectionTimeoutMS": 1000,
        "connectTimeoutMS": 1000,
        "socketTimeoutMS": 250,
        "waitQueueTimeoutMS": 3000,
        "appname": "imbucket",
    }


def test_default_mongo_waits_fit_the_call_bound_with_pymongo_s_one_retry() -> None:
    # Per attempt: server selection, a pooled connection, connecting, one reply; twice.
    o = c.client_options("mongodb://db/chat")
    one = (
        o["serverSelectionTimeoutMS"]
        + o["waitQueueTimeoutMS"]
        + o["connectTimeoutMS"]
        + o["socketTimeoutMS"]
    )
    assert 2 * one <= CALL_BOUND_SECONDS * 1000

    assert c.DEFAULT_URL == "mongodb://127.0.0.1:27017/imbucket"
    assert c.DEFAULT_DATABASE == "imbucket"


# ---- buckets -------------------------------------------------------------------------------


def test_new_bucket_holds_every_slot_with_every_key() -> None:
    bucket = c.new_bucket(f"{CONV}:1", {2: Slot(message=message(103, CONV))}, 4)
    assert bucket == {
        "doc_id": f"{CONV}:1",
        "msgs": [EMPTY, EMPTY, {**EMPTY, "msg": msg_doc(message(103))}, EMPTY],
    }
    assert list(bucket) == ["doc_id", "msgs"]  # no _id: the driver adds an ObjectId


def test_empty_slot_shape() -> None:
    assert c.new_bucket("x:0", {}, 1)["msgs"] == [EMPTY]


def test_write_messages_matches_only_free_slots() -> None:
    command = c.write_messages(f"{CONV}:0", {0: message(1), 5: message(6)})
    assert command == c.Update(
        {
            "doc_id": f"{CONV}:0",
            "msgs.0.msg": {"$type": "null"},
            "msgs.0.purged": {"$ne": True},
            "msgs.5.msg": {"$type": "null"},
            "msgs.5.purged": {"$ne": True},
        },
        {"$set": {"msgs.0.msg": msg_doc(message(1)), "msgs.5.msg": msg_doc(message(6))}},
        upsert=False,
    )


def test_set_revoke_matches_only_unrevoked_unpurged_slots() -> None:
    assert c.set_revoke(f"{CONV}:1", 49, REVOKE) == c.Update(
        {
            "doc_id": f"{CONV}:1",
            "msgs.49.revoke": {"$type": "null"},
            "msgs.49.purged": {"$ne": True},
        },
        {"$set": {"msgs.49.revoke": REVOKE_DOC}},
        upsert=False,
    )


def test_patch_bucket_adds_to_sets_and_replaces_purged_slots() -> None:
    command = c.patch_bucket(
        f"{CONV}:0",
        {
            1: SlotPatch(add_deleted_by="bob"),
            2: SlotPatch(set_read=True),
            3: SlotPatch(add_read_by="carol"),
            4: SlotPatch(purge=True, add_deleted_by="ignored"),
        },
    )
    assert command == c.Update(
        {
            "doc_id": f"{CONV}:0",
            "msgs.1.purged": {"$ne": True},  # purged slots keep no tags
            "msgs.2.purged": {"$ne": True},
            "msgs.3.purged": {"$ne": True},
        },
        {
            "$set": {"msgs.2.is_read": True, "msgs.4": PURGED},
            "$addToSet": {"msgs.1.del_list": "bob", "msgs.3.read_by": "carol"},
        },
        upsert=False,
    )


def test_patch_bucket_sends_no_empty_operator() -> None:
    assert c.patch_bucket("x:0", {7: SlotPatch(add_deleted_by="bob")}).update == {
        "$addToSet": {"msgs.7.del_list": "bob"}
    }
    assert c.patch_bucket("x:0", {7: SlotPatch(purge=True)}).update == {"$set": {"msgs.7": PURGED}}


def test_patch_bucket_marks_spilled_slots() -> None:
    assert c.patch_bucket("x:0", {7: SlotPatch(mark_spilled=True)}) == c.Update(
        {"doc_id": "x:0", "msgs.7.purged": {"$ne": True}}, {"$set": {"msgs.7.spilled": True}}
    )


def slot_entries(index: int, name: str) -> dict[str, Any]:
    return {
        "$let": {
            "vars": {"slot": {"$arrayElemAt": ["$msgs", index]}},
            "in": {"$size": {"$ifNull": [f"$$slot.{name}", []]}},
        }
    }


BUCKET_DELETERS = {
    "$sum": {
        "$map": {
            "input": "$msgs",
            "as": "slot",
            "in": {"$size": {"$ifNull": ["$$slot.del_list", []]}},
        }
    }
}


def test_patch_within_a_budget_matches_only_while_the_bucket_has_room() -> None:
    budget = TagBudget(deleters_per_slot=3, deleters_per_bucket=5, readers_per_slot=2)
    patches = {
        9: SlotPatch(add_deleted_by="bob"),
        2: SlotPatch(add_deleted_by="bob"),
        4: SlotPatch(add_read_by="carol"),
        5: SlotPatch(mark_spilled=True),
        6: SlotPatch(purge=True),
    }
    assert c.patch_bucket("x:0", patches, budget) == c.Update(
        {
            "doc_id": "x:0",
            **{f"msgs.{i}.purged": {"$ne": True} for i in (9, 2, 4, 5)},
            "$expr": {
                "$and": [
                    {"$lt": [slot_entries(2, "del_list"), 3]},
                    {"$lt": [slot_entries(9, "del_list"), 3]},
                    {"$lt": [slot_entries(4, "read_by"), 2]},
                    {"$lte": [{"$add": [BUCKET_DELETERS, 2]}, 5]},
                ]
            },
        },
        {
            "$set": {"msgs.5.spilled": True, "msgs.6": PURGED},
            "$addToSet": {
                "msgs.9.del_list": "bob",
                "msgs.2.del_list": "bob",
                "msgs.4.read_by": "carol",
            },
        },
    )


def test_patch_within_a_budget_adds_no_condition_for_flags_and_purges() -> None:
    budget = TagBudget(3, 5)
    patches = {
        1: SlotPatch(set_read=True),
        2: SlotPatch(mark_spilled=True),
        3: SlotPatch(purge=True),
    }
    assert c.patch_bucket("x:0", patches, budget).filter == {
        "doc_id": "x:0",
        **{f"msgs.{i}.purged": {"$ne": True} for i in (1, 2)},  # no $expr
    }


def test_spilled_deleters_are_one_unordered_insert() -> None:
    assert c.spill_documents([("x:0", 3, "bob"), ("x:1", 0, "bob")]) == c.InsertMany(
        [
            {"doc_id": "x:0\x1f3\x1fbob"},
            {"doc_id": "x:1\x1f0\x1fbob"},
        ],
        ordered=False,
    )


def test_a_spilled_deleter_is_keyed_by_its_slot_and_user_in_its_id() -> None:
    assert c.spill_key("x:0", 3, "bob") == "x:0\x1f3\x1fbob"
    assert c.spill_entry(c.spill_key("x:0", 3, "b:o b")) == ("x:0", 3, "b:o b")


def test_spilled_deleters_are_found_by_id_ranges_of_their_slots() -> None:
    assert c.spilled_in({"x:0": [3]}) == {"doc_id": {"$gte": "x:0\x1f3\x1f", "$lt": "x:0\x1f3\x20"}}
    assert c.spilled_in({"x:0": [3, 1], "x:2": [0]}) == {
        "$or": [
            {"doc_id": {"$gte": "x:0\x1f3\x1f", "$lt": "x:0\x1f3\x20"}},
            {"doc_id": {"$gte": "x:0\x1f1\x1f", "$lt": "x:0\x1f1\x20"}},
            {"doc_id": {"$gte": "x:2\x1f0\x1f", "$lt": "x:2\x1f0\x20"}},
        ]
    }
    assert c.SPILLED_FIELDS == {"_id": 0, "doc_id": 1}


def test_a_viewers_spilled_entries_are_found_by_their_exact_ids() -> None:
    assert c.spilled_by({"x:0": [3, 1], "x:2": [0]}, "bob") == {
        "doc_id": {"$in": ["x:0\x1f3\x1fbob", "x:0\x1f1\x1fbob", "x:2\x1f0\x1fbob"]}
    }


def test_the_doc_id_range_of_a_slot_holds_its_deleters_and_no_other_documents() -> None:
    """Slot 1's range must not reach slot 10's, bucket x:0's neighbours, the bucket itself or
    a user document of its conversation, all in ``msg`` (byte order)."""
    (bounds,) = [c.spilled_in({"x:0": [1]})["doc_id"]]
    inside = [c.spill_key("x:0", 1, user) for user in (" ", "a", "~", "\u4e2d", "z" * 50)]
    outside = [c.spill_key("x:0", 10, "a"), c.spill_key("x:0", 2, "a"), c.spill_key("x:01", 1, "a")]
    users = c.UserDocs(c.BUCKETS)
    outside += ["x:0", "x:1", users.key("x", "a")["doc_id"], users.key("x:0", "1")["doc_id"]]
    encoded = {key: key.encode() for key in inside + outside}
    low, high = bounds["$gte"].encode(), bounds["$lt"].encode()
    assert all(low <= encoded[key] < high for key in inside)
    assert not any(low <= encoded[key] < high for key in outside)


def test_bucket_size_is_the_bson_size_of_the_document() -> None:
    assert c.bucket_size("x:0") == [
        {"$match": {"doc_id": "x:0"}},
        {"$project": {"_id": 0, "bytes": {"$bsonSize": "$$ROOT"}}},
    ]


def test_new_bucket_writes_the_spilled_flag_only_when_set() -> None:
    bucket = c.new_bucket("x:0", {1: Slot(deleted_by=frozenset({"bob"}), spilled=True)}, 2)
    assert bucket["msgs"] == [EMPTY, {**EMPTY, "del_list": ["bob"], "spilled": True}]


def test_read_of_one_bucket_projects_only_the_wanted_slots() -> None:
    assert c.read_buckets({f"{CONV}:0": [4, 0, 99]}) == [
        {"$match": {"doc_id": {"$in": [f"{CONV}:0"]}}},
        {
            "$project": {
                "_id": 0,
                "doc_id": 1,
                "msgs": {
                    "$map": {
                        "input": [4, 0, 99],
                        "as": "index",
                        "in": {"$arrayElemAt": ["$msgs", "$$index"]},
                    }
                },
            }
        },
    ]


def test_read_spanning_two_buckets_is_one_aggregate() -> None:
    def pick(indexes: list[int]) -> dict[str, Any]:
        return {
            "$map": {
                "input": indexes,
                "as": "index",
                "in": {"$arrayElemAt": ["$msgs", "$$index"]},
            }
        }

    assert c.read_buckets({f"{CONV}:0": [98, 99], f"{CONV}:1": [0, 1, 2]}) == [
        {"$match": {"doc_id": {"$in": [f"{CONV}:0", f"{CONV}:1"]}}},
        {
            "$project": {
                "_id": 0,
                "doc_id": 1,
                "msgs": {
                    "$switch": {
                        "branches": [
                            {
                                "case": {"$eq": ["$doc_id", {"$literal": f"{CONV}:0"}]},
                                "then": pick([98, 99]),
                            },
                            {
                                "case": {"$eq": ["$doc_id", {"$literal": f"{CONV}:1"}]},
                                "then": pick([0, 1, 2]),
                            },
                        ],
                        "default": [],
                    }
                },
            }
        },
    ]


def test_bucket_lookup_and_message_count() -> None:
    assert c.bucket_exists("x:3") == {"doc_id": "x:3"}
    user = {  # a user document (UserDocs) or a send claim (ClaimDocs)
        "$or": [
            {"$ne": [{"$type": "$read_seq"}, "missing"]},
            {"$ne": [{"$type": "$claimed_at"}, "missing"]},
        ]
    }
    aside = {"$eq": [{"$type": "$msgs"}, "missing"]}  # no bucket: a user, claim or spill
    assert [
        {
            "$group": {
                "_id": None,
                "messages": {
                    "$sum": {
                        "$size": {
                            "$filter": {
                                "input": {"$ifNull": ["$msgs", []]},
                                "as": "slot",
                                "cond": {"$eq": [{"$type": "$$slot.msg"}, "object"]},
                            }
                        }
                    }
                },
                "aside_docs": {"$sum": {"$cond": [aside, 1, 0]}},
                "user_bytes": {"$sum": {"$cond": [user, {"$bsonSize": "$$ROOT"}, 0]}},
            }
        }
    ] == c.COUNT_BUCKET_MESSAGES


def test_storage_stats_come_from_collstats() -> None:
    assert c.STORAGE_STATS == [{"$collStats": {"storageStats": {}}}]


# ---- rows ----------------------------------------------------------------------------------


def test_row_id_is_conversation_then_seq() -> None:
    assert list(c.row_id(CONV, 7).items()) == [("c", CONV), ("s", 7)]


def test_rows_are_read_by_id_in_one_find() -> None:
    assert c.rows_in(CONV, [3, 1]) == {"_id": {"$in": [{"c": CONV, "s": 3}, {"c": CONV, "s": 1}]}}


def test_fill_row_upserts_only_into_a_free_row() -> None:
    assert c.fill_row(CONV, message(5)) == c.Update(
        {"_id": {"c": CONV, "s": 5}, "msg": {"$type": "null"}, "purged": {"$ne": True}},
        {
            "$set": {"msg": msg_doc(message(5))},
            "$setOnInsert": {
                "revoke": None,
                "del_list": [],
                "is_read": False,
                "purged": False,
                "read_by": [],
            },
        },
        upsert=True,
    )


def test_revoke_row_upserts_only_into_an_unrevoked_unpurged_row() -> None:
    assert c.revoke_row(CONV, 5, REVOKE) == c.Update(
        {"_id": {"c": CONV, "s": 5}, "revoke": {"$type": "null"}, "purged": {"$ne": True}},
        {
            "$set": {"revoke": REVOKE_DOC},
            "$setOnInsert": {
                "msg": None,
                "del_list": [],
                "is_read": False,
                "purged": False,
                "read_by": [],
            },
        },
        upsert=True,
    )


def test_tag_rows_are_upserts_that_complete_a_new_row() -> None:
    assert c.patch_row(CONV, 9, SlotPatch(add_deleted_by="bob")) == c.Update(
        {"_id": {"c": CONV, "s": 9}},
        {
            "$addToSet": {"del_list": "bob"},
            "$setOnInsert": {
                "msg": None,
                "revoke": None,
                "is_read": False,
                "purged": False,
                "read_by": [],
            },
        },
        upsert=True,
    )
    assert c.patch_row(CONV, 9, SlotPatch(set_read=True, add_read_by="carol")).update == {
        "$set": {"is_read": True},
        "$addToSet": {"read_by": "carol"},
        "$setOnInsert": {"msg": None, "revoke": None, "del_list": [], "purged": False},
    }


def test_purge_row_sets_the_purged_shape() -> None:
    assert c.patch_row(CONV, 9, SlotPatch(purge=True)) == c.Update(
        {"_id": {"c": CONV, "s": 9}}, {"$set": PURGED}, upsert=True
    )


def test_row_message_count_also_sums_key_bytes() -> None:
    user = {  # a user document (UserDocs) or a send claim (ClaimDocs)
        "$or": [
            {"$ne": [{"$type": "$_id.u"}, "missing"]},
            {"$ne": [{"$type": "$_id.m"}, "missing"]},
        ]
    }
    assert [
        {
            "$group": {
                "_id": None,
                "messages": {"$sum": {"$cond": [{"$eq": [{"$type": "$msg"}, "object"]}, 1, 0]}},
                "aside_docs": {"$sum": {"$cond": [user, 1, 0]}},
                "user_bytes": {"$sum": {"$cond": [user, {"$bsonSize": "$$ROOT"}, 0]}},
                "key_bytes": {"$sum": {"$cond": [user, 0, {"$bsonSize": "$_id"}]}},
            }
        }
    ] == c.COUNT_ROW_MESSAGES


# ---- seqs and layout -----------------------------------------------------------------------


def test_allocate_is_an_inc_upsert_returning_the_new_counter() -> None:
    assert c.allocate(CONV, 3) == c.FindAndUpdate(
        {"conversation_id": CONV},
        {"$inc": {"max_seq": 3}, "$setOnInsert": {"min_seq": 0}},
        {"_id": 0, "max_seq": 1},
        upsert=True,
        return_new=True,
    )


def test_raises_only_move_up() -> None:
    counters = c.CONVERSATION_COUNTERS
    assert c.raise_to(c.conversation_seqs(CONV), "min_seq", 8, counters) == c.FindAndUpdate(
        {"conversation_id": CONV},
        {"$max": {"min_seq": 8}, "$setOnInsert": {"max_seq": 0}},
        {"_id": 0, "min_seq": 1},
        upsert=True,
        return_new=True,
    )
    assert c.raise_to(c.conversation_seqs(CONV), "max_seq", 4, counters).update == {
        "$max": {"max_seq": 4},
        "$setOnInsert": {"min_seq": 0},
    }
    key = {"doc_id": f"{CONV}\x1fdave"}
    assert c.raise_to(key, "min_seq", 11, c.USER_COUNTERS) == c.FindAndUpdate(
        key,
        {"$max": {"min_seq": 11}, "$setOnInsert": {"read_seq": 0}},
        {"_id": 0, "min_seq": 1},
    )
    assert c.raise_read_seq(c.UserDocs(c.BUCKETS), CONV, "dave", 9) == c.Update(
        key, {"$max": {"read_seq": 9}, "$setOnInsert": {"min_seq": 0}}, upsert=True
    )


def test_a_user_document_is_keyed_by_the_data_collections_own_key() -> None:
    """Sorted, and sharded, with its conversation's data: (conversation_id, user_id) order."""
    buckets, rows = c.UserDocs(c.BUCKETS), c.UserDocs(c.ROWS)
    assert buckets.key(CONV, "dave") == {"doc_id": f"{CONV}\x1fdave"}
    assert list(rows.key(CONV, "dave")["_id"].items()) == [("c", CONV), ("u", "dave")]
    assert (buckets.key_field, rows.key_field) == ("doc_id", "_id")
    assert buckets.keys_in([(CONV, "a"), ("x", "b")]) == {
        "doc_id": {"$in": [f"{CONV}\x1fa", "x\x1fb"]}
    }
    assert rows.owner({"_id": {"c": CONV, "u": "dave"}}) == (CONV, "dave")
    assert buckets.owner({"doc_id": f"{CONV}\x1fdave"}) == (CONV, "dave")
    keys = [buckets.key(conv, user)["doc_id"] for conv, user in [("a", "z"), ("ab", "a")]]
    assert keys == sorted(keys)  # "a" before "ab", whatever the user ids


def test_scans_keep_data_and_user_documents_apart() -> None:
    assert c.scan(c.BUCKETS, None, 5).filter == {"msgs": {"$exists": True}}
    assert c.scan(c.ROWS, ["x", 3], 5).filter == {
        "$and": [
            {"_id.s": {"$exists": True}},
            {"$or": [{"_id.c": {"$gt": "x"}}, {"_id.c": "x", "_id.s": {"$gt": 3}}]},
        ]
    }
    users = c.scan(c.USERS_IN + c.ROWS, None, 5)
    assert (users.filter, users.sort) == ({"read_seq": {"$exists": True}}, [("_id", 1)])
    users = c.scan(c.USERS_IN + c.BUCKETS, ["k"], 5)
    assert users.filter == {"$and": [{"read_seq": {"$exists": True}}, {"doc_id": {"$gt": "k"}}]}
    assert c.key_of({"_id": {"c": "x", "u": "y"}}, c.USERS_IN + c.ROWS) == ["x", "y"]
    claims = c.scan(c.CLAIMS_IN + c.ROWS, ["x", "m-a"], 5)
    assert (claims.filter, claims.sort) == (
        {
            "$and": [
                {"claimed_at": {"$exists": True}},
                {"$or": [{"_id.c": {"$gt": "x"}}, {"_id.c": "x", "_id.m": {"$gt": "m-a"}}]},
            ]
        },
        [("_id", 1)],
    )
    claims = c.scan(c.CLAIMS_IN + c.BUCKETS, None, 5)
    assert (claims.filter, claims.sort) == ({"claimed_at": {"$exists": True}}, [("doc_id", 1)])
    assert c.key_of({"_id": {"c": "x", "m": "y"}}, c.CLAIMS_IN + c.ROWS) == ["x", "y"]


def test_watermarks_are_one_aggregate_from_the_users_document_and_the_counter() -> None:
    assert c.watermarks(CONV, "dave", c.UserDocs(c.BUCKETS)) == [
        {"$match": {"doc_id": f"{CONV}\x1fdave"}},
        {"$project": {"_id": 0, "user_min_seq": "$min_seq"}},
        {
            "$unionWith": {
                "coll": "seq",
                "pipeline": [
                    {"$match": {"conversation_id": CONV}},
                    {"$project": {"_id": 0, "max_seq": 1, "min_seq": 1}},
                ],
            }
        },
    ]


def test_a_view_merges_the_watermarks_into_one_document() -> None:
    assert c.view_marks(CONV, "dave", c.UserDocs(c.ROWS)) == [
        *c.watermarks(CONV, "dave", c.UserDocs(c.ROWS)),
        {
            "$group": {
                "_id": None,
                "max_seq": {"$max": "$max_seq"},
                "min_seq": {"$max": "$min_seq"},
                "user_min_seq": {"$max": "$user_min_seq"},
            }
        },
        {
            "$project": {
                "_id": 0,
                "max_seq": {"$ifNull": ["$max_seq", 0]},
                "min_seq": {"$ifNull": ["$min_seq", 0]},
                "user_min_seq": {"$ifNull": ["$user_min_seq", 0]},
            }
        },
    ]


FLOOR = {"$max": ["$min_seq", "$user_min_seq"]}


def test_a_row_view_joins_the_rows_of_the_visible_seqs_by_id() -> None:
    assert c.row_view(CONV, "dave", Pick(seqs=(5, 3))) == [
        *c.view_marks(CONV, "dave", c.UserDocs(c.ROWS)),
        {
            "$addFields": {
                "want": {
                    "$filter": {
                        "input": {"$literal": [5, 3]},
                        "as": "seq",
                        "cond": {
                            "$and": [
                                {"$gte": ["$$seq", FLOOR]},
                                {"$lte": ["$$seq", "$max_seq"]},
                            ]
                        },
                    }
                }
            }
        },
        {
            "$addFields": {
                "keys": {
                    "$map": {
                        "input": "$want",
                        "as": "seq",
                        "in": {"c": {"$literal": CONV}, "s": "$$seq"},
                    }
                }
            }
        },
        {
            "$lookup": {
                "from": "msg_row",
                "localField": "keys",
                "foreignField": "_id",
                "let": {"want": "$want"},
                "pipeline": [{"$addFields": {"del_list": c.viewed_deleters("$del_list", "dave")}}],
                "as": "found",
            }
        },
        {"$unwind": {"path": "$found", "preserveNullAndEmptyArrays": True}},
        {"$project": {"want": 0, "keys": 0}},
    ]


def test_a_latest_view_counts_the_newest_seqs_above_the_floor() -> None:
    want = c.row_view(CONV, "dave", Pick(latest=20))[5]["$addFields"]["want"]
    first = {"$max": [{"$subtract": ["$max_seq", 19]}, FLOOR, 1]}
    count = {"$max": [0, {"$subtract": [{"$add": ["$max_seq", 1]}, "$$first"]}]}
    assert want == {
        "$let": {
            "vars": {"first": first},
            "in": {
                "$map": {
                    "input": {"$range": [0, count]},
                    "as": "k",
                    "in": {"$add": ["$$first", "$$k"]},
                }
            },
        }
    }


def test_a_bucket_view_joins_buckets_by_doc_id_and_the_viewers_spilled_entries() -> None:
    pipeline = c.bucket_view(CONV, "dave", Pick(seqs=(7,)), 100)
    before = {"$subtract": ["$$seq", 1]}
    index = {
        "$toString": {
            "$divide": [{"$toDecimal": {"$subtract": [before, {"$mod": [before, 100]}]}}, 100]
        }
    }
    doc_id = {"$concat": [{"$literal": f"{CONV}:"}, index]}
    assert pipeline[6]["$addFields"] == {
        "keys": {"$setUnion": [{"$map": {"input": "$want", "as": "seq", "in": doc_id}}]}
    }
    lookup = pipeline[7]["$lookup"]
    assert (lookup["from"], lookup["localField"], lookup["foreignField"]) == (
        "msg",
        "keys",
        "doc_id",
    )
    project, flagged, spilled, drop = lookup["pipeline"]
    mine = {"$filter": {"input": "$$want", "as": "seq", "cond": {"$eq": [doc_id, "$doc_id"]}}}
    assert project["$project"]["msgs"]["$map"]["input"] == mine
    slot = project["$project"]["msgs"]["$map"]["in"]["$let"]["in"]["$mergeObjects"][1]
    assert slot["seq"] == "$$seq" and slot["del_list"] == c.viewed_deleters(
        "$$slot.del_list", "dave"
    )
    key = flagged["$addFields"]["spill_keys"]["$map"]["in"]["$concat"]
    assert key[0] == "$doc_id" and key[-1] == {"$literal": "dave"}
    assert key[1] == key[3] == c.SPILL_SEPARATOR
    assert spilled["$lookup"]["from"] == "msg"
    assert (spilled["$lookup"]["localField"], spilled["$lookup"]["foreignField"]) == (
        "spill_keys",
        "doc_id",
    )
    assert drop == {"$project": {"spill_keys": 0}}
    assert pipeline[-2:] == [
        {"$unwind": {"path": "$found", "preserveNullAndEmptyArrays": True}},
        {"$project": {"want": 0, "keys": 0}},
    ]


def test_claims_are_keyed_by_the_data_collection_s_unique_key() -> None:
    rows, buckets = c.ClaimDocs(c.ROWS), c.ClaimDocs(c.BUCKETS)
    assert rows.key(CONV, "m-a") == {"_id": {"c": CONV, "m": "m-a"}}
    assert buckets.key(CONV, "m-a") == {"doc_id": f"{CONV}\x1em-a"}
    assert rows.owner({"_id": {"c": CONV, "m": "m-a"}}) == (CONV, "m-a")
    assert buckets.owner({"doc_id": f"{CONV}\x1em-a"}) == (CONV, "m-a")
    # \x1e sorts below every id character: claims sort as (conversation_id, client_msg_id)
    # and apart from user documents (\x1f), spilled deleters and buckets.
    keys = [buckets.key(conv, cid)["doc_id"] for conv, cid in [("a", "z"), ("ab", "a")]]
    assert keys == sorted(keys)
    assert c.CLAIM_SEPARATOR not in (c.USER_SEPARATOR, c.SPILL_SEPARATOR)
    found = [{"doc_id": f"{CONV}\x1em-a", "seq": 7}, {"doc_id": f"{CONV}\x1em-b", "seq": 0}]
    assert buckets.seq_of(found) == {"m-a": 7}  # a pending claim (seq 0) has no seq yet


def test_claims_are_one_unordered_insert_in_client_msg_id_order() -> None:
    # The unique key of the data collection refuses a second claim of an id; unordered, so
    # the new claims of a batch land whatever the duplicates next to them.
    at, since = 1_700_000_000_000, 1_700_000_000_000 - 7 * 86_400_000
    claimed = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    expires = claimed + timedelta(days=7)  # claimed_at + the retention window
    claims = c.ClaimDocs(c.BUCKETS)
    assert c.claim_sends(claims, CONV, {"m-b": 8, "m-a": 7}, at, since) == c.InsertMany(
        [
            {"doc_id": f"{CONV}\x1em-a", "seq": 7, "claimed_at": claimed, "expire_at": expires},
            {"doc_id": f"{CONV}\x1em-b", "seq": 8, "claimed_at": claimed, "expire_at": expires},
        ],
        ordered=False,
    )


def test_an_expired_claim_is_replaced_only_while_it_is_still_expired() -> None:
    at, since = 1_700_000_000_000, 1_700_000_000_000 - 7 * 86_400_000
    claimed = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    [update] = c.replace_expired(c.ClaimDocs(c.ROWS), CONV, {"m-a": 9}, at, since)
    assert update == c.Update(
        {"_id": {"c": CONV, "m": "m-a"}, "claimed_at": {"$lt": claimed - timedelta(days=7)}},
        {"$set": {"seq": 9, "claimed_at": claimed, "expire_at": claimed + timedelta(days=7)}},
    )


def test_a_fresh_send_s_records_collide_unless_the_claim_is_still_its_own_pending_one() -> None:
    at, since = 1_700_000_000_000, 1_700_000_000_000 - 7 * 86_400_000
    claimed = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    records = c.claim_records(c.ClaimDocs(c.ROWS), CONV, {"m-b": 4, "m-a": 5}, "o", at, since)
    assert records == [
        c.Update(
            {"_id": {"c": CONV, "m": cid}, "owner": "o", "seq": c.UNALLOCATED},
            {
                "$set": {"seq": seq},
                "$setOnInsert": {"claimed_at": claimed, "expire_at": claimed + timedelta(7)},
            },
            upsert=True,
        )
        for cid, seq in [("m-b", 4), ("m-a", 5)]
    ]


def test_claims_are_pruned_by_their_claim_time() -> None:
    before = c.claims_before(1_700_000_000_000)
    assert before == {"claimed_at": {"$lt": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)}}


def test_live_claims_are_those_of_the_retention_window() -> None:
    since = 1_700_000_000_000
    assert c.sends_in(c.ClaimDocs(c.BUCKETS), CONV, ["m-a"], since) == {
        "doc_id": {"$in": [f"{CONV}\x1em-a"]},
        "claimed_at": {"$gte": datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)},
    }


def test_sent_seqs_are_read_by_the_unique_key() -> None:
    # Ids are plain values inside the key: one shaped like an operator matches only itself.
    rows = c.ClaimDocs(c.ROWS)
    assert c.sends_in(rows, CONV, ["m-a", "$ne"]) == {
        "_id": {"$in": [{"c": CONV, "m": "m-a"}, {"c": CONV, "m": "$ne"}]},
    }
    assert rows.fields == {"_id": 1, "seq": 1}
    assert c.ClaimDocs(c.BUCKETS).fields == {"_id": 0, "doc_id": 1, "seq": 1}


def test_the_claims_footprint_is_one_aggregate_over_the_claims() -> None:
    assert c.claim_footprint() == [
        {"$match": {"claimed_at": {"$exists": True}}},
        {
            "$group": {
                "_id": None,
                "claims": {"$sum": 1},
                "bytes": {"$sum": {"$bsonSize": "$$ROOT"}},
            }
        },
    ]


def test_layout_is_recorded_once_and_read_back() -> None:
    assert c.record_layout("msg", 100) == c.FindAndUpdate(
        {"_id": "msg"},
        {"$setOnInsert": {"bucket_size": 100}},
        {"_id": 0, "bucket_size": 1},
        upsert=True,
        return_new=True,
    )


def test_listed_rows_come_by_union_after_the_marks() -> None:
    assert c.listed_row_view(CONV, "dave", [5, 3]) == [
        *c.view_marks(CONV, "dave", c.UserDocs(c.ROWS)),
        {"$unionWith": {"coll": "msg_row", "pipeline": c.viewed_rows(CONV, [5, 3], "dave")}},
    ]


def test_a_mark_read_reads_max_seq_by_union() -> None:
    assert c.conversation_max_seq(CONV) == {
        "$unionWith": {
            "coll": "seq",
            "pipeline": [
                {"$match": {"conversation_id": CONV}},
                {"$project": {"_id": 0, "max_seq": 1}},
            ],
        }
    }


def test_a_mark_read_reads_the_rows_and_the_readers_document_then_max_seq() -> None:
    ids = [c.row_id(CONV, 5), c.row_id(CONV, 3), {"c": CONV, "u": "bob"}]
    assert c.marked_rows(CONV, "bob", [5, 3]) == [
        {"$match": {"_id": {"$in": ids}}},
        c.conversation_max_seq(CONV),
    ]


def test_a_mark_read_reads_the_buckets_and_the_readers_document_then_max_seq() -> None:
    wanted = {f"{CONV}:0": [4], f"{CONV}:1": [0, 2]}
    reader = f"{CONV}\x1fbob"
    read = c.read_buckets(wanted, also=[reader])
    assert read[0] == {"$match": {"doc_id": {"$in": [*wanted, reader]}}}
    assert read[1]["$project"]["read_seq"] == 1
    assert read[1]["$project"]["msgs"]["$switch"]["default"] == []  # the reader's: no slots
    assert c.marked_buckets(CONV, "bob", wanted) == [*read, c.conversation_max_seq(CONV)]
    # One bucket alone still goes through the $switch, which leaves the reader's out.
    one = c.read_buckets({f"{CONV}:0": [4]}, also=[reader])
    assert "$switch" in one[1]["$project"]["msgs"]


def test_open_bucket_inserts_the_whole_bucket_only_where_there_is_none() -> None:
    command = c.open_bucket(f"{CONV}:1", {0: Slot(message=message(101, CONV))}, 2)
    assert command == c.Update(
        {"doc_id": f"{CONV}:1"},
        {"$setOnInsert": {"msgs": [{**EMPTY, "msg": msg_doc(message(101))}, EMPTY]}},
        upsert=True,
    )
