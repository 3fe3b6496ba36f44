"""How the MongoDB adapters read replies, and that what they write survives BSON unchanged."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import bson
import pytest

from imbucket.adapters.codec import plain_int, slot_to_doc
from imbucket.adapters.mongo import commands, replies
from imbucket.bench.instrument.scratch import is_emulated
from imbucket.domain.errors import LayoutMismatch, StoreUnavailable
from imbucket.domain.model import Revoke, Role, Slot, StoreStats, Watermarks
from imbucket.domain.validation import check_message
from imbucket.testing.factories import message

CONV = "sg_g1"


def over_the_wire(document: Any) -> Any:
    """document as the server would hand it back: encoded to BSON and decoded again."""
    return bson.decode(bson.encode({"d": document}))["d"]


def test_a_bucket_survives_bson_and_reads_back_slot_by_slot() -> None:
    tagged = Slot(
        message=replace(message(102, CONV), options={"silent": True}),
        revoke=Revoke("olivia", Role.OWNER, "Olivia", 7),
        deleted_by=frozenset({"bob", "amy"}),
        is_read=True,
        read_by=frozenset({"carol"}),
    )
    stored = over_the_wire(commands.new_bucket(f"{CONV}:1", {1: tagged}, 100))
    # What the read aggregate returns for wanted indexes [1, 0]: those slots, in that order.
    found = [{"doc_id": f"{CONV}:1", "msgs": [stored["msgs"][1], stored["msgs"][0]]}]
    assert replies.bucket_slots({f"{CONV}:1": [1, 0], f"{CONV}:2": [5]}, found) == {
        f"{CONV}:1": {1: tagged, 0: Slot()}
    }


def test_openim_purged_slot_and_missing_elements_read_as_empty() -> None:
    found = [{"doc_id": "si_a_b:0", "msgs": [{"msg": None}, None]}]
    assert replies.bucket_slots({"si_a_b:0": [3, 4]}, found) == {"si_a_b:0": {3: Slot(), 4: Slot()}}


def test_rows_survive_bson_and_read_back_by_seq() -> None:
    rows = over_the_wire(
        [{"_id": commands.row_id(CONV, s), **slot_to_doc(Slot(message(s, CONV)))} for s in (1, 2)]
    )
    assert replies.row_slots(rows) == {
        1: Slot(message=message(1, CONV)),
        2: Slot(message=message(2, CONV)),
    }


def test_every_update_document_is_valid_bson() -> None:
    revoke = Revoke("olivia", Role.OWNER)
    for command in (
        commands.write_messages("x:0", {0: message(1, "x")}),
        commands.set_revoke("x:0", 0, revoke),
        commands.fill_row("x", message(1, "x")),
        commands.revoke_row("x", 1, revoke),
    ):
        assert over_the_wire(command.filter) == command.filter
        assert over_the_wire(command.update) == command.update


def test_duplicate_positions_of_a_bulk_write() -> None:
    details = {
        "writeErrors": [
            {"index": 0, "code": 11000, "errmsg": "E11000 duplicate key"},
            {"index": 3, "code": 11000, "errmsg": "E11000 duplicate key"},
        ],
        "writeConcernErrors": [],
    }
    assert replies.duplicate_positions(details) == [0, 3]
    assert replies.duplicate_positions({"writeErrors": []}) == []


@pytest.mark.parametrize(
    "details",
    [
        {"writeErrors": [{"index": 0, "code": 11000}, {"index": 1, "code": 2, "errmsg": "bad"}]},
        {"writeErrors": [], "writeConcernErrors": [{"code": 64, "errmsg": "timeout"}]},
    ],
)
def test_other_bulk_write_failures_are_unavailable(details: dict[str, Any]) -> None:
    with pytest.raises(StoreUnavailable):
        replies.duplicate_positions(details)


def test_watermarks_merge_whichever_documents_exist() -> None:
    both = [{"max_seq": 10, "min_seq": 2}, {"user_min_seq": 11}]
    assert replies.watermarks(both) == Watermarks(10, 2, 11)
    assert replies.watermarks([{"user_min_seq": 4}]) == Watermarks(0, 0, 4)
    assert replies.watermarks([]) == Watermarks()


def test_sent_seqs_by_client_msg_id() -> None:
    for claims in (commands.ClaimDocs(commands.ROWS), commands.ClaimDocs(commands.BUCKETS)):
        command = commands.claim_sends(claims, CONV, {"m-a": 7, "m-b": 2**62})
        found = over_the_wire(command.documents)
        assert claims.seq_of(found) == {"m-a": 7, "m-b": 2**62}
        assert claims.seq_of([]) == {}


def test_layout_mismatch_is_refused() -> None:
    replies.checked_layout({"bucket_size": 100}, 100, "msg")
    with pytest.raises(LayoutMismatch, match="bucket size 100, opened with 50"):
        replies.checked_layout({"bucket_size": 100}, 50, "msg")


def test_stats_sum_shards_and_count_clustered_keys_as_index() -> None:
    shards = [
        {"storageStats": {"count": 3, "size": 1000, "storageSize": 4096, "totalIndexSize": 100}},
        {"storageStats": {"count": 2, "size": 500, "storageSize": 4096, "totalIndexSize": 50}},
    ]
    counted = [{"_id": None, "messages": 240, "key_bytes": 700}]
    assert replies.store_stats(shards, counted) == StoreStats(240, 5, 1500, 150)
    assert replies.store_stats(shards, counted, clustered=True) == StoreStats(240, 5, 1500, 850)
    assert replies.store_stats([], []) == StoreStats(0, 0, 0, 0)
    # 2 documents aside (a user document of 60 bytes, a spilled deleter, whose bytes are data)
    aside = [{**counted[0], "aside_docs": 2, "user_bytes": 60}]
    assert replies.store_stats(shards, aside) == StoreStats(240, 3, 1440, 150)


def test_spilled_users_group_by_bucket_and_slot() -> None:
    found = [
        {"doc_id": "x:0\x1f3\x1fbob"},
        {"doc_id": "x:0\x1f3\x1fcarol"},
        {"doc_id": "x:1\x1f0\x1fbob"},
    ]
    assert replies.spilled_users(found) == {"x:0": {3: {"bob", "carol"}}, "x:1": {0: {"bob"}}}
    assert replies.spilled_users([]) == {}


def test_bucket_bytes_of_a_missing_bucket_is_none() -> None:
    assert replies.bucket_bytes([{"bytes": 1234}]) == 1234
    assert replies.bucket_bytes([]) is None


def test_version_tuple() -> None:
    assert replies.version_tuple({"version": "7.0.12", "versionArray": [7, 0, 12, 0]}) == (
        7,
        0,
        12,
        0,
    )
    assert replies.version_tuple({"version": "5.3.1-rc0"}) == (5, 3, 1)


def test_int64_values_read_back_as_plain_ints_the_domain_accepts() -> None:
    # pymongo decodes BSON int64 (epoch-ms times, seqs past 2**31) as bson.Int64, on any
    # server; the domain's checks accept exact ints only.
    seq = 2**40 + 1
    stored_message = replace(
        message(seq, CONV), send_time=1_700_000_000_123, create_time=1_700_000_000_456
    )
    tagged = Slot(
        message=stored_message, revoke=Revoke("olivia", Role.OWNER, "", 1_700_000_001_000)
    )
    doc_id = f"{CONV}:{(seq - 1) // 100}"
    bucket = over_the_wire(commands.new_bucket(doc_id, {0: tagged}, 100))
    assert type(bucket["msgs"][0]["msg"]["send_time"]) is bson.Int64  # what the driver hands back
    row = over_the_wire({"_id": commands.row_id(CONV, seq), **slot_to_doc(tagged)})
    assert type(row["_id"]["s"]) is bson.Int64

    from_bucket = replies.bucket_slots(
        {doc_id: [0]}, [{"doc_id": doc_id, "msgs": bucket["msgs"][:1]}]
    )
    from_row = replies.row_slots([row])
    for slot in (from_bucket[doc_id][0], from_row[seq]):
        assert slot == tagged
        assert slot.message is not None and slot.revoke is not None
        assert check_message(slot.message, CONV) == slot.message
        times = (
            slot.message.seq,
            slot.message.send_time,
            slot.message.create_time,
            slot.revoke.time,
        )
        assert {type(value) for value in times} == {int}
    assert [type(seq) for seq in from_row] == [int]


@pytest.mark.parametrize("value", [True, False, "5", 5.0, None])
def test_plain_int_leaves_non_ints_for_the_domain_to_refuse(value: object) -> None:
    assert plain_int(value) is value


def test_plain_int_turns_int_subclasses_into_ints() -> None:
    assert type(plain_int(bson.Int64(7))) is int
    assert plain_int(bson.Int64(7)) == 7


def test_the_engine_is_named_from_build_info() -> None:
    real = {"version": "7.0.12", "versionArray": [7, 0, 12, 0], "gitVersion": "b6513ce0", "ok": 1}
    emulated = {"version": "7.0.0", "versionArray": [7, 0, 0, 0], "gitVersion": "mongoeco"}
    assert replies.server_version(real) == "MongoDB 7.0.12"
    assert replies.server_version(emulated) == "mongoeco (MongoDB 7.0 wire protocol)"
    assert (replies.is_emulator(real), replies.is_emulator(emulated)) == (False, True)
    assert (is_emulated("MongoDB 7.0.12"), is_emulated(replies.server_version(emulated))) == (
        False,
        True,
    )


def test_a_view_reply_gives_the_marks_of_its_first_document_and_every_joined_one() -> None:
    marks = {"max_seq": 9, "min_seq": 2, "user_min_seq": 4}
    found = [{**marks, "found": {"doc_id": f"{CONV}:0"}}, {**marks, "found": {"doc_id": "x"}}]
    assert replies.view_reply(found) == (
        Watermarks(9, 2, 4),
        [{"doc_id": f"{CONV}:0"}, {"doc_id": "x"}],
    )
    assert replies.view_reply([marks]) == (Watermarks(9, 2, 4), [])  # nothing joined
    assert replies.view_reply([]) == (Watermarks(), [])  # neither watermark document


def test_a_bucket_views_slots_come_by_seq_with_the_viewers_spilled_entries() -> None:
    stored = message(102, CONV)
    slot = {**slot_to_doc(Slot(message=stored)), "seq": 102, "spilled": True}
    bucket = {
        "doc_id": f"{CONV}:1",
        "msgs": [slot, {**slot_to_doc(Slot()), "seq": 103}],
        "spilled": [{"doc_id": commands.spill_key(f"{CONV}:1", 1, "dave")}],
    }
    slots, spilled = replies.viewed_bucket_seqs(CONV, [over_the_wire(bucket)])
    assert slots == {102: Slot(message=stored, spilled=True), 103: Slot()}
    assert spilled == {f"{CONV}:1": {1: {"dave"}}}


def test_a_union_reply_tells_the_marks_from_the_rows_by_their_id() -> None:
    row = {"_id": {"c": CONV, "s": 3}, "msg": None}
    marks = {"max_seq": 9, "min_seq": 2, "user_min_seq": 4}
    assert replies.union_reply([marks, row]) == (Watermarks(9, 2, 4), [row])
    assert replies.union_reply([row]) == (Watermarks(), [row])  # no watermark document


def test_a_marked_reply_tells_the_reader_marks_from_the_data_by_its_key() -> None:
    row = {"_id": {"c": CONV, "s": 3}, "msg": None}
    marks = [{"max_seq": 9}, {"_id": {"c": CONV, "u": "bob"}, "min_seq": 0, "read_seq": 4}]
    assert replies.marked_reply([row, *marks], "_id") == (replies.ReaderMarks(9, 4), [row])
    bucket = {"doc_id": f"{CONV}:0", "msgs": []}
    marks[1] = {"doc_id": f"{CONV}\x1fbob", "msgs": [], "read_seq": 4}
    assert replies.marked_reply([bucket, *marks], "doc_id") == (
        replies.ReaderMarks(9, 4),
        [bucket],
    )
    # a missing counter document, or one without the field: 0
    assert replies.marked_reply([row, {}], "_id") == (replies.ReaderMarks(0, 0), [row])
