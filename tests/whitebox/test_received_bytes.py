"""Reads independent of deleters: bytes received at the drivers, pinned (counts, never times).

A slot deleted by 5,000 users is set up in bulk through the store's own engine (one bucket
created whole plus one side-table insert, or bulk inserts of deletion rows), so the pin runs
on every backend row, the mongoeco ones and the cached ones included, in seconds. The
5,000 deletes through the service are ``tests/contract/test_bounded_buckets.py``'s part.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import insert

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.row import MongoRowRepository
from imbucket.adapters.row import RowMessageStore
from imbucket.adapters.sql.row import SqlRowRepository
from imbucket.app import MessageService
from imbucket.bench.instrument import received
from imbucket.domain.model import Slot
from imbucket.domain.projection import Tombstone, TombstoneReason
from imbucket.ports.message_store import MessageStore
from imbucket.testing.factories import CONV, messages

HOT_DELETERS = 5_000
HOT, TWIN = 2, 1  # seq 2 is deleted by every user, seq 1 (same size) by nobody
PULLS = 2  # each measured pull twice: the second one is answered by the cache, if any
SQL_ROWS_PER_INSERT = 1_000  # deletion rows per INSERT, well inside every engine's limits
# mongoeco's insert_many grows quadratically within one command (100 documents: 0.06 s, 1,000:
# 4 s), but not across commands: the spilled deleters are written 100 per call on every row.
SPILLED_PER_CALL = 100

received.prepare()  # the pymongo listener, before the fixtures open a MongoDB client


def inner_store(service: MessageService) -> MessageStore:
    """The store under the cache, or the store itself on an uncached row."""
    store: MessageStore = getattr(service.store, "store", service.store)
    return store


def hot_message(service: MessageService, users: list[str]) -> None:
    """Seqs 1..3 stored, seq HOT deleted by every one of users, written in bulk."""
    store = inner_store(service)
    stored = messages(1, 3)
    if isinstance(store, BucketMessageStore):
        # One bucket created whole: the first deleters inline (as many as the budget lets a
        # slot keep), the others in the side table; the slot is flagged as delete-for-me does.
        repository, layout = store.repository, store.layout
        inline = users[: store.budget.deleters_per_slot]
        slots = {layout.slot_index(m.seq): Slot(message=m) for m in stored}
        slots[layout.slot_index(HOT)] = Slot(
            message=stored[HOT - 1], deleted_by=frozenset(inline), spilled=True
        )
        doc_id = layout.doc_id(CONV, HOT)
        assert repository.create_bucket(doc_id, slots)
        spilled = [(doc_id, layout.slot_index(HOT), user) for user in users[len(inline) :]]
        for start in range(0, len(spilled), SPILLED_PER_CALL):
            repository.add_spilled(spilled[start : start + SPILLED_PER_CALL])
        service.seqs.raise_max_seq(CONV, 3)
        return
    service.ingest(CONV, stored)
    assert isinstance(store, RowMessageStore)
    repository = store.repository
    if isinstance(repository, SqlRowRepository):
        rows = [{"conversation_id": CONV, "seq": HOT, "user_id": user} for user in users]
        deletions = repository.schema.deletions
        for start in range(0, len(rows), SQL_ROWS_PER_INSERT):
            repository.db.execute(
                insert(deletions).values(rows[start : start + SQL_ROWS_PER_INSERT])
            )
        return
    assert isinstance(repository, MongoRowRepository)
    repository._rows.update_one(  # white-box: the deleters in one write
        {"_id": commands.row_id(CONV, HOT)}, {"$set": {"del_list": users}}
    )


def received_by_pull(service: MessageService, viewer: str, seq: int) -> int:
    """Bytes the drivers receive for PULLS pulls of seq by viewer (cold, then cached)."""
    cache = getattr(service.store, "cache", None)
    if cache is not None:  # the first pull is a miss for every seq alike
        cache.invalidate(CONV, [seq])
    with received.counting() as replies:
        for _ in range(PULLS):
            service.pull(CONV, viewer, [seq])
    assert replies.total() > 0
    return replies.total()


def seen(service: MessageService, viewer: str, seq: int) -> Any:
    (entry,) = service.pull(CONV, viewer, [seq])
    return entry.reason if isinstance(entry, Tombstone) else "message"


@pytest.fixture
def hot(service: MessageService) -> list[str]:
    """The deleters of seq HOT, set up in bulk on this row."""
    users = [f"user-{n:04d}" for n in range(HOT_DELETERS)]
    hot_message(service, users)
    return users


def test_a_pull_of_a_slot_deleted_by_5000_users_receives_at_most_1_2x_its_twin(
    service: MessageService, hot: list[str]
) -> None:
    """On bucket rows the first deleter is inline and the last one spilled: a spilled
    viewer's pull looks up its own entry in the side table inside the same statement or
    aggregate (docs/buckets.md), so the reply stays that of one slot whatever the number of
    deleters; on row layouts each is a deleter like any other. (One test, not one per kind
    of viewer: the 5,000 deleters take a minute to set up on a mongoeco row.)"""
    first, last = hot[0], hot[-1]
    for viewer in (first, last, hot[2_500]):
        assert seen(service, viewer, HOT) == TombstoneReason.DELETED
        assert seen(service, viewer, TWIN) == "message"
    assert seen(service, "bystander", HOT) == "message"
    # The setup is effective: an unscoped read (migrate, inspect) ships every deleter (a
    # pull on sql-bucket ships the bucket whole, its inline deleters bounded by the budget).
    with received.counting() as unscoped:
        everything = inner_store(service).get(CONV, [HOT])[HOT]
    assert len(everything.deleted_by) == HOT_DELETERS
    one_pull = received_by_pull(service, "bystander", TWIN) / PULLS
    assert unscoped.total() > sum(map(len, hot)) > one_pull
    for viewer in (first, last, "bystander"):
        assert received_by_pull(service, viewer, HOT) <= 1.2 * received_by_pull(
            service, viewer, TWIN
        )
