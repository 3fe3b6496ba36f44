"""MongoSeqStore's claim decisions, on a recording collection (a driver stub, not an engine).

No MongoDB runs here: the stub only replays what the server would answer to the commands
pinned in test_mongo_commands.py, so that the adapter's handling of those answers is tested.
"""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.errors import BulkWriteError

from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.seq import MongoSeqStore
from imbucket.domain.errors import StoreUnavailable

CONV = "sg_g1"
CLAIMS = commands.ClaimDocs(commands.BUCKETS)


class RecordingSends:
    """The claims' collection, as the adapter sees it: insert_many may fail, find: ``stored``."""

    def __init__(self, stored: list[dict[str, Any]], failure: dict[str, Any] | None) -> None:
        self.stored = stored
        self.failure = failure
        self.calls: list[tuple[str, Any]] = []

    def insert_many(self, documents: list[dict[str, Any]], ordered: bool) -> None:
        self.calls.append(("insert_many", (documents, ordered)))
        if self.failure is not None:
            raise BulkWriteError(self.failure)

    def find(self, filter: dict[str, Any], projection: dict[str, Any]) -> list[dict[str, Any]]:
        self.calls.append(("find", (filter, projection)))
        return self.stored

    def bulk_write(self, requests: list[Any], ordered: bool) -> None:
        self.calls.append(("bulk_write", ([(r._filter, r._doc) for r in requests], ordered)))


class StubConnection:
    def __init__(self, sends: RecordingSends) -> None:
        self.sends = sends

    def collection(self, name: str) -> Any:
        return self.sends if name == commands.BUCKETS else None

    def ensure_indexes(self, name: str) -> None:
        pass

    def ensure_claim_indexes(self, name: str) -> None:
        pass


def seq_store(stored: list[dict[str, Any]], failure: dict[str, Any] | None = None) -> Any:
    sends = RecordingSends(stored, failure)
    users = commands.UserDocs(commands.BUCKETS)
    return MongoSeqStore(StubConnection(sends), users), sends  # type: ignore[arg-type]


def claim(client_msg_id: str, seq: int) -> dict[str, Any]:
    """A claim document as a find with ``CLAIMS.fields`` returns it."""
    return {**CLAIMS.key(CONV, client_msg_id), "seq": seq}


def duplicate(index: int) -> dict[str, Any]:
    return {"index": index, "code": 11000, "errmsg": "E11000 duplicate key"}


def test_a_claim_is_one_insert_and_one_find() -> None:
    store, sends = seq_store([claim("m-a", 7)])
    assert store.claim_sends(CONV, {"m-a": 7}) == {"m-a": 7}
    command = commands.claim_sends(CLAIMS, CONV, {"m-a": 7})
    assert sends.calls == [
        ("insert_many", (command.documents, False)),
        ("find", (commands.sends_in(CLAIMS, CONV, ["m-a"]), CLAIMS.fields)),
    ]


def test_a_claim_lost_to_an_earlier_one_returns_the_earlier_seq() -> None:
    failure = {"writeErrors": [duplicate(0)], "writeConcernErrors": []}
    stored = [claim("m-a", 3), claim("m-b", 8)]
    store, _ = seq_store(stored, failure)
    assert store.claim_sends(CONV, {"m-a": 7, "m-b": 8}) == {"m-a": 3, "m-b": 8}


def test_other_insert_failures_are_unavailable() -> None:
    failure = {"writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}]}
    store, sends = seq_store([], failure)
    with pytest.raises(StoreUnavailable):
        store.claim_sends(CONV, {"m-a": 7})
    assert [name for name, _ in sends.calls] == ["insert_many"]


def test_nothing_to_claim_or_find_sends_nothing() -> None:
    store, sends = seq_store([])
    assert store.claim_sends(CONV, {}) == {}
    assert store.sent_seqs(CONV, []) == {}
    assert sends.calls == []


def test_a_claim_refused_as_a_duplicate_replaces_it_only_where_it_expired() -> None:
    # m-b was claimed before: one bulk write replaces that claim if (and only if) it is older
    # than since; then the find returns whichever claim is live.
    at, since = 1_700_000_000_000, 1_699_000_000_000
    failure = {"writeErrors": [duplicate(1)], "writeConcernErrors": []}
    stored = [claim("m-a", 7), claim("m-b", 8)]
    store, sends = seq_store(stored, failure)
    assert store.claim_sends(CONV, {"m-a": 7, "m-b": 8}, at, since) == {"m-a": 7, "m-b": 8}
    [replace] = commands.replace_expired(CLAIMS, CONV, {"m-b": 8}, at, since)
    assert sends.calls[1] == ("bulk_write", ([(replace.filter, replace.update)], False))
    assert [name for name, _ in sends.calls] == ["insert_many", "bulk_write", "find"]
