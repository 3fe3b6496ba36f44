"""An insert's first write across buckets, on every bucket backend: what it finds there.

SQLite writes every bucket of an insert in one upsert, mongo-bucket fills the first bucket
and opens the buckets whose slot 0 the insert takes in one command, MariaDB creates such a
bucket first: whatever the first write did, each message's outcome is what the state
machine finds, a slot taken, purged or tagged by another writer included.
"""

from __future__ import annotations

import pytest

from imbucket.ports.message_store import MessageStore
from imbucket.testing.factories import CONV, message, messages
from imbucket.testing.rows import BUCKETS, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(BUCKETS), indirect=True)


def test_a_taken_slot_of_the_first_bucket_leaves_the_new_bucket_created(
    store: MessageStore,
) -> None:
    store.insert(CONV, messages(1, 98))
    store.insert(CONV, [message(99, content="another")])
    result = store.insert(CONV, messages(98, 150))
    assert result.duplicates == (98,)
    assert result.conflicts == (99,)
    assert result.inserted == tuple(range(100, 151))
    found = store.get(CONV, list(range(98, 151)))
    assert found[99].message == message(99, content="another")
    assert [found[s].message for s in range(100, 151)] == messages(100, 150)


def test_a_taken_slot_of_a_bucket_there_already_is_found(store: MessageStore) -> None:
    store.insert(CONV, messages(1, 49))
    store.insert(CONV, [message(101, content="another"), message(250)])
    result = store.insert(CONV, messages(50, 250))
    assert result.conflicts == (101,)
    assert result.duplicates == (250,)
    assert result.inserted == (*range(50, 101), *range(102, 250))
    found = store.get(CONV, [100, 101, 102, 201])
    assert found[101].message == message(101, content="another")
    assert [found[s].message for s in (100, 102, 201)] == [message(s) for s in (100, 102, 201)]


def test_a_bucket_a_tag_write_created_keeps_its_tags_and_takes_the_messages(
    store: MessageStore,
) -> None:
    store.insert(CONV, messages(1, 50))
    store.delete_for(CONV, [101], "carol")
    store.purge(CONV, [102])
    result = store.insert(CONV, messages(51, 150))
    assert result.purged == (102,)
    assert result.inserted == (*range(51, 102), *range(103, 151))
    found = store.get(CONV, [101, 102, 150])
    assert found[101].message == message(101)
    assert found[101].deleted_by == frozenset({"carol"})
    assert 102 not in found or found[102].message is None
    assert found[150].message == message(150)


def test_a_batch_opening_several_buckets_stores_each_once(store: MessageStore) -> None:
    result = store.insert(CONV, messages(1, 350))
    assert result.inserted == tuple(range(1, 351))
    assert store.insert(CONV, messages(1, 350)).duplicates == tuple(range(1, 351))
    found = store.get(CONV, list(range(1, 351)))
    assert [found[s].message for s in range(1, 351)] == messages(1, 350)
