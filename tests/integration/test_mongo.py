"""What only a real MongoDB can show: stored shapes, indexes, round trips, layout checks.

Runs on the suite's MongoDB: IMBUCKET_TEST_MONGO_URL, a Docker container, else the mongoeco
wire server (tests/mongo_emulator.py); skips only when none of them can run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.bucket import MongoBucketRepository, MongoBucketStore
from imbucket.adapters.mongo.connection import MongoConnection
from imbucket.adapters.mongo.row import MongoRowRepository, MongoRowStore
from imbucket.adapters.mongo.send import MongoFreshSends
from imbucket.adapters.mongo.seq import MongoSeqStore
from imbucket.adapters.row import RowMessageStore
from imbucket.app import open_service
from imbucket.domain.errors import LayoutMismatch
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Slot, SlotPatch
from imbucket.testing.factories import message, messages

CONV = "sg_mongo"


class Commands(CommandListener):
    """Counts the commands sent to the server, by name (pymongo accepts only its listener types)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: CommandStartedEvent) -> None:
        self.names.append(event.command_name)

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass


@pytest.fixture
def sent() -> Commands:
    return Commands()


@pytest.fixture
def connection(mongo_url: str, sent: Commands) -> Iterator[MongoConnection]:
    opened = MongoConnection(mongo_url, [sent])
    yield opened
    opened.close()


@pytest.fixture
def raw(mongo_url: str) -> Iterator[Any]:
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url)
    yield client.get_default_database()
    client.close()


def test_bucket_is_stored_as_openim_stores_it(connection: MongoConnection, raw: Any) -> None:
    store = BucketMessageStore(MongoBucketRepository(connection, BucketLayout(100)))
    store.insert(CONV, messages(1, 2, CONV))
    stored = raw[commands.BUCKETS].find_one({"doc_id": f"{CONV}:0"}, {"_id": 0})
    expected = commands.new_bucket(
        f"{CONV}:0", {0: Slot(message(1, CONV)), 1: Slot(message(2, CONV))}, 100
    )
    assert stored == expected
    indexes = raw[commands.BUCKETS].index_information()
    assert {name: spec["key"] for name, spec in indexes.items()} == {
        "_id_": [("_id", 1)],
        "doc_id_1": [("doc_id", 1)],
    }
    assert indexes["doc_id_1"]["unique"] is True


def test_a_pull_across_two_buckets_is_one_aggregate(
    connection: MongoConnection, sent: Commands
) -> None:
    store = BucketMessageStore(MongoBucketRepository(connection, BucketLayout(100)))
    store.insert(CONV, messages(95, 105, CONV))
    sent.names.clear()
    found = store.get(CONV, list(range(95, 106)))
    assert sorted(found) == list(range(95, 106))
    assert sent.names == ["aggregate"]


def test_a_batch_into_an_existing_bucket_is_one_update(
    connection: MongoConnection, sent: Commands
) -> None:
    store = BucketMessageStore(MongoBucketRepository(connection, BucketLayout(100)))
    store.insert(CONV, messages(1, 1, CONV))
    sent.names.clear()
    assert store.insert(CONV, messages(2, 50, CONV)).inserted == tuple(range(2, 51))
    assert sent.names == ["update"]


def test_another_bucket_size_is_refused(mongo_url: str) -> None:
    config = {"store": {"backend": "mongo-bucket", "url": mongo_url, "bucket_size": 100}}
    open_service(config).close()
    with pytest.raises(LayoutMismatch):
        open_service({"store": {**config["store"], "bucket_size": 50}})


def test_spilled_deleters_are_documents_of_msg_keyed_by_doc_id_and_found_by_slot(
    connection: MongoConnection, raw: Any
) -> None:
    repository = MongoBucketRepository(connection, BucketLayout(100))
    entries = [("x:0", 1, "ann"), ("x:0", 1, "bob"), ("x:0", 10, "ann"), ("x:1", 1, "ann")]
    assert repository.add_spilled(entries) == 4
    assert repository.add_spilled([("x:0", 1, "bob"), ("x:0", 2, "bob")]) == 1  # a set-add
    assert repository.read_spilled({"x:0": [1, 2]}) == {"x:0": {1: {"ann", "bob"}, 2: {"bob"}}}
    assert raw[commands.BUCKETS].find_one({"doc_id": "x:0\x1f10\x1fann"}) is not None
    assert repository.stats().documents == 0  # deleters are data, not buckets
    repository.drop_spilled({"x:0": [1]})
    assert repository.read_spilled({"x:0": [1, 10]}) == {"x:0": {10: {"ann"}}}


def test_a_first_spill_is_one_command_and_a_refused_patch_writes_no_entry(
    connection: MongoConnection, raw: Any, sent: Commands
) -> None:
    repository = MongoBucketRepository(connection, BucketLayout(100))
    store = BucketMessageStore(repository)
    store.insert(CONV, messages(1, 3, CONV))
    bucket = f"{CONV}:0"
    flag = SlotPatch(mark_spilled=True)
    sent.names.clear()
    assert repository.patch_many({bucket: {1: flag}}, None, [(bucket, 1, "bob")]) == {bucket}
    assert sent.names == ["update"]  # the flagging patch and the entry: one ordered command
    assert repository.read_spilled({bucket: [1]}) == {bucket: {1: {"bob"}}}
    assert repository.patch(bucket, {2: SlotPatch(purge=True)})
    # Slot 2 purged since the read: the patch collides on doc_id and stops the command; the
    # fallback reads the bucket and spares the purged slot (``patch``). The entry may then
    # land beside it, as any spill racing a purge may (docs/buckets.md): never shown.
    sent.names.clear()
    repository.patch_many({bucket: {2: flag}}, None, [(bucket, 2, "carol")])
    assert sent.names[:3] == ["update", "update", "aggregate"]  # refused, refused, read
    assert raw[commands.BUCKETS].count_documents({"doc_id": bucket}) == 1  # nothing inserted
    slot = repository.read({bucket: [2]})[bucket][2]
    assert slot.purged and not slot.spilled


def test_rows_are_clustered_and_read_in_one_find(
    connection: MongoConnection, sent: Commands
) -> None:
    store = RowMessageStore(MongoRowRepository(connection, BucketLayout(100)))
    assert store.insert(CONV, messages(1, 5, CONV)).inserted == (1, 2, 3, 4, 5)
    clustered = connection.version()[:2] >= commands.CLUSTERED_SINCE
    assert connection.is_clustered(commands.ROWS) is clustered
    sent.names.clear()
    assert sorted(store.get(CONV, [5, 1, 3])) == [1, 3, 5]
    assert sent.names == ["find"]
    stats = store.stats()
    assert stats.messages == 5 and stats.index_bytes > 0


@pytest.mark.parametrize("collection", [commands.BUCKETS, commands.ROWS])
def test_watermarks_are_one_round_trip(
    connection: MongoConnection, sent: Commands, collection: str
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(collection))
    seqs.allocate(CONV, 10)
    seqs.raise_user_min_seq(CONV, "dave", 4)
    sent.names.clear()
    marks = seqs.watermarks(CONV, "dave")
    assert (marks.max_seq, marks.min_seq, marks.user_min_seq) == (10, 0, 4)
    assert sent.names == ["aggregate"]


USER_KEYS = {
    "mongo-bucket": (commands.BUCKETS, {"doc_id": f"{CONV}\x1fdave"}),
    "mongo-row": (commands.ROWS, {"_id": {"c": CONV, "u": "dave"}}),
}


@pytest.mark.parametrize("backend", USER_KEYS)
def test_user_watermarks_live_in_the_data_collection_apart_from_its_data(
    mongo_url: str, raw: Any, backend: str
) -> None:
    """A user's document is keyed by the data collection's own key; scans, stats and the
    store's reads see only the data; mark_read writes tags and read seq in one command."""
    collection, key = USER_KEYS[backend]
    service = open_service({"store": {"backend": backend, "url": mongo_url}})
    try:
        service.ingest(CONV, messages(1, 3, CONV))
        assert service.mark_read(CONV, [2], "dave") == 1
        service.clear_history(CONV, "dave")
        found = raw[collection].find_one(key, {"_id": 0, "min_seq": 1, "read_seq": 1})
        assert found == {"min_seq": 4, "read_seq": 2}
        assert "seq_user" not in raw.list_collection_names()  # OpenIM's place for them
        assert service.store.stats().messages == 3
        assert service.store.stats().documents == (1 if backend == "mongo-bucket" else 3)
        page = service.store.scan(None, 1000)
        assert [(s.conversation_id, s.seq) for s in page.slots] == [(CONV, 1), (CONV, 2), (CONV, 3)]
        users = service.seqs.scan_user_seqs(None, 10)
        assert [(u.conversation_id, u.user_id, u.min_seq, u.read_seq) for u in users.rows] == [
            (CONV, "dave", 4, 2)
        ]
        assert service.seqs.user_seqs_of([(CONV, "dave")])[CONV, "dave"].read_seq == 2
    finally:
        service.close()


def test_the_server_is_named_from_the_build_info_command(
    connection: MongoConnection, sent: Commands
) -> None:
    # pymongo's server_info() sends the legacy `buildinfo`, which mongoeco refuses.
    name = connection.server_version()
    assert name.startswith(("MongoDB ", "mongoeco (MongoDB "))
    assert connection.version() >= (4, 4)
    assert sent.names == ["buildInfo"]  # asked once


def test_a_second_open_of_the_rows_keeps_the_collection(
    connection: MongoConnection, sent: Commands
) -> None:
    first = RowMessageStore(MongoRowRepository(connection, BucketLayout(100)))
    first.insert(CONV, messages(1, 3, CONV))
    sent.names.clear()
    again = RowMessageStore(MongoRowRepository(connection, BucketLayout(100)))
    # found, so no create (whose error for an existing collection differs between servers)
    assert sent.names == ["listCollections", "findAndModify"]  # and the layout check
    assert sorted(again.get(CONV, [1, 2, 3])) == [1, 2, 3]


CLAIMS = commands.ClaimDocs(commands.BUCKETS)  # where MongoSeqStore(…, UserDocs(BUCKETS)) claims


def pending_claim(raw: Any, client_msg_id: str, claimed_at: int, owner: str = "dead") -> None:
    """A claim whose sender stopped after claiming, before recording a seq."""
    command = commands.claim_pending(CLAIMS, CONV, [client_msg_id], owner, claimed_at, 0)
    raw[commands.BUCKETS].insert_one(command.documents[0])


def test_a_new_send_claims_allocates_and_records_in_three_commands(
    connection: MongoConnection, sent: Commands
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    sent.names.clear()
    assert seqs.allocate_sends(CONV, ["m-a", "m-b"], at=1_000) == {"m-a": 1, "m-b": 2}
    assert sent.names == ["insert", "findAndModify", "update"]
    assert seqs.sent_seqs(CONV, ["m-a", "m-b"]) == {"m-a": 1, "m-b": 2}


def test_a_fresh_claim_is_the_same_three_commands_with_no_lookup_before_them(
    connection: MongoConnection, sent: Commands
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    sent.names.clear()
    assert seqs.claim_fresh(CONV, ["m-b", "m-a"], at=1_000) == {"m-b": 1, "m-a": 2}
    assert sent.names == ["insert", "findAndModify", "update"]
    assert seqs.sent_seqs(CONV, ["m-a", "m-b"]) == {"m-a": 2, "m-b": 1}


def test_a_fresh_claim_of_a_batch_claimed_whole_writes_nothing(
    connection: MongoConnection, sent: Commands, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    seqs.claim_fresh(CONV, ["m-a", "m-b"], at=1_000)
    sent.names.clear()
    assert seqs.claim_fresh(CONV, ["m-b", "m-a"], at=2_000) is None
    assert sent.names == ["insert"]  # both refused as duplicates
    assert seqs.max_seq(CONV) == 2
    assert raw[commands.BUCKETS].count_documents(CLAIMS.ONLY) == 2


def test_a_fresh_claim_refused_in_part_takes_back_the_claims_that_landed(
    connection: MongoConnection, sent: Commands, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    seqs.claim_fresh(CONV, ["m-a"], at=1_000)
    sent.names.clear()
    assert seqs.claim_fresh(CONV, ["m-c", "m-a", "m-b"], at=2_000) is None
    assert sent.names == ["insert", "delete"]
    assert seqs.max_seq(CONV) == 1
    assert [CLAIMS.owner(d)[1] for d in raw[commands.BUCKETS].find(CLAIMS.ONLY)] == ["m-a"]
    # The general path then claims the new ones in the order given.
    got = seqs.allocate_sends(CONV, ["m-c", "m-b"], at=2_000)
    assert got == {"m-c": 2, "m-b": 3}


def test_a_call_waiting_for_a_claim_taken_back_claims_it_itself(
    connection: MongoConnection, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    pending_claim(raw, "m-a", claimed_at=10**12, owner="fresh")
    finds = 0
    real_find = seqs._sends.find

    def find(*args: Any, **kwargs: Any) -> Any:
        nonlocal finds
        finds += 1
        if finds == 2:  # the waiting call found the claim pending: the fresh send gives it up
            raw[commands.BUCKETS].delete_one({**CLAIMS.key(CONV, "m-a"), "owner": "fresh"})
        return real_find(*args, **kwargs)

    seqs._sends.find = find  # type: ignore[method-assign]
    assert seqs.allocate_sends(CONV, ["m-a"], at=10**12 + 1) == {"m-a": 1}
    assert seqs.max_seq(CONV) == 1


def test_a_fresh_claim_of_a_stale_pending_claim_leaves_it_to_the_general_path(
    connection: MongoConnection, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    lease_ms = int(2 * connection.timeouts.call * 1000)
    now = 10**12
    pending_claim(raw, "m-d", claimed_at=now - lease_ms - 1)
    assert seqs.claim_fresh(CONV, ["m-d", "m-e"], at=now) is None
    assert seqs.allocate_sends(CONV, ["m-d", "m-e"], at=now) == {"m-d": 1, "m-e": 2}


def test_a_fresh_claim_of_an_expired_claim_leaves_it_to_the_general_path(
    connection: MongoConnection,
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    day = 86_400_000
    now = time.time_ns() // 1_000_000
    seqs.claim_fresh(CONV, ["m-a"], at=now - 2 * day)  # no expire_at: no TTL deletes it
    assert seqs.claim_fresh(CONV, ["m-a", "m-b"], at=now, since=now - day) is None
    got = seqs.allocate_sends(CONV, ["m-a", "m-b"], at=now, since=now - day)
    assert got == {"m-a": 2, "m-b": 3}  # m-a's claim expired: a new message


def test_a_claim_left_pending_past_its_lease_is_taken_over(
    connection: MongoConnection, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    lease_ms = 2 * connection.timeouts.call * 1000
    now = 10**12
    pending_claim(raw, "m-a", claimed_at=now - int(lease_ms) - 1)
    assert seqs.sent_seqs(CONV, ["m-a"]) == {}  # pending: no seq to answer with yet
    assert seqs.allocate_sends(CONV, ["m-a", "m-b"], at=now) == {"m-a": 1, "m-b": 2}
    assert seqs.max_seq(CONV) == 2


def test_a_live_pending_claim_is_waited_for_and_its_seq_returned(
    connection: MongoConnection, raw: Any
) -> None:
    seqs = MongoSeqStore(connection, commands.UserDocs(commands.BUCKETS))
    pending_claim(raw, "m-a", claimed_at=10**12)
    recorded = threading.Event()

    def sender_records_its_seq() -> None:
        recorded.wait()  # the waiting call has found the claim pending
        key = {**CLAIMS.key(CONV, "m-a"), "owner": "dead"}
        raw[commands.BUCKETS].update_one(key, {"$set": {"seq": 7}})

    finds = 0
    real_find = seqs._sends.find

    def find(*args: Any, **kwargs: Any) -> Any:
        nonlocal finds
        finds += 1
        if finds == 2:  # the first one was the takeover check
            recorded.set()
        return real_find(*args, **kwargs)

    seqs._sends.find = find  # type: ignore[method-assign]
    other = threading.Thread(target=sender_records_its_seq)
    other.start()
    assert seqs.allocate_sends(CONV, ["m-a"], at=10**12 + 1) == {"m-a": 7}
    other.join()
    assert seqs.max_seq(CONV) == 0  # the other sender allocated; this call allocated nothing


def fresh_sender(connection: MongoConnection, layout: str) -> tuple[Any, MongoFreshSends]:
    """A store of layout (msg or msg_row) and a fresh sender whose claims live beside it."""
    if layout == commands.BUCKETS:
        repository: Any = MongoBucketRepository(connection, BucketLayout(100))
        store: Any = MongoBucketStore(repository)
    else:
        repository = MongoRowRepository(connection, BucketLayout(100))
        store = MongoRowStore(repository)
    seqs = MongoSeqStore(connection, commands.UserDocs(layout))
    return store, MongoFreshSends(seqs, repository.riding)


@pytest.mark.parametrize("layout", [commands.BUCKETS, commands.ROWS])
def test_a_fresh_send_records_its_claims_in_the_messages_write(
    connection: MongoConnection, sent: Commands, layout: str
) -> None:
    store, fresh = fresh_sender(connection, layout)
    store.insert(CONV, messages(1, 1, CONV))  # the bucket exists
    fresh.seqs.allocate(CONV, 1)
    sent.names.clear()
    unnumbered = [message(0, CONV, client_msg_id=cid) for cid in ("m-b", "m-a")]
    assert fresh.store_fresh(CONV, unnumbered, 1_000, store.insert) == 2
    assert sent.names == ["insert", "findAndModify", "update"]
    assert fresh.seqs.sent_seqs(CONV, ["m-a", "m-b"]) == {"m-b": 2, "m-a": 3}
    assert [store.get(CONV, [s])[s].message.client_msg_id for s in (2, 3)] == ["m-b", "m-a"]


@pytest.mark.parametrize("layout", [commands.BUCKETS, commands.ROWS])
def test_a_fresh_send_whose_claim_was_taken_over_stores_no_message(
    connection: MongoConnection, raw: Any, layout: str
) -> None:
    # The records lead the messages' write, ordered: m-b's, taken over by another sender
    # (one that found it pending past the lease), collides and stops the command there.
    store, fresh = fresh_sender(connection, layout)
    claims = commands.ClaimDocs(layout)

    def insert(conversation_id: str, numbered: list[Any]) -> Any:
        raw[layout].update_one(claims.key(CONV, "m-b"), {"$set": {"owner": "other"}})
        return store.insert(conversation_id, numbered)

    unnumbered = [message(0, CONV, client_msg_id=cid) for cid in ("m-a", "m-b", "m-c")]
    assert fresh.store_fresh(CONV, unnumbered, 1_000, insert) is None
    assert store.get(CONV, [1, 2, 3]) == {}
    # m-a's record ran before; m-c's, which did not, is written when the send gives up:
    # the general path fills both seqs, and the other sender holds m-b.
    assert fresh.seqs.sent_seqs(CONV, ["m-a", "m-b", "m-c"]) == {"m-a": 1, "m-c": 3}
    pending = raw[layout].find_one(claims.key(CONV, "m-b"))
    assert (pending["owner"], pending["seq"]) == ("other", 0)


@pytest.mark.parametrize("layout", [commands.BUCKETS, commands.ROWS])
def test_claims_stay_out_of_the_data_scans_and_counts(
    connection: MongoConnection, layout: str
) -> None:
    store, fresh = fresh_sender(connection, layout)
    unnumbered = [message(0, CONV, client_msg_id=cid) for cid in ("m-a", "m-b")]
    now, day = time.time_ns() // 1_000_000, 86_400_000  # the real time: see the TTL index
    assert fresh.store_fresh(CONV, unnumbered, now, store.insert, since=now - day) == 1
    stats = store.stats()
    assert (stats.messages, stats.documents) == (2, 1 if layout == commands.BUCKETS else 2)
    assert [(s.conversation_id, s.seq) for s in store.scan(None, 10).slots] == [
        (CONV, 1),
        (CONV, 2),
    ]
    claims = fresh.seqs.scan_sends(None, 10).rows
    assert [(c.conversation_id, c.client_msg_id, c.seq) for c in claims] == [
        (CONV, "m-a", 1),
        (CONV, "m-b", 2),
    ]
    assert fresh.seqs.send_claims().rows == 2
    assert fresh.seqs.prune_sends(now + 1, 10) == 2
    assert fresh.seqs.send_claims().rows == 0
    assert store.stats().messages == 2
