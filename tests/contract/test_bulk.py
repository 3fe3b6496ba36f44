"""The bulk methods a migration writes and reads with: many conversations per call, batches.

``insert_many`` and ``get_many`` must answer exactly what ``insert`` and ``get`` answer
conversation by conversation; ``counters_of`` and ``user_seqs_of`` what the single getters
answer; writes made inside ``batch`` are kept once it ends, and on SQL a failure inside it
undoes them.
"""

from __future__ import annotations

from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.domain.model import InsertResult, Revoke, Role
from imbucket.testing.factories import messages
from imbucket.testing.migration_data import CONVERSATIONS, USERS, fill
from imbucket.testing.rows import EARLY_TAGS, needs


def test_insert_many_answers_per_conversation_what_insert_answers(
    service: MessageService,
) -> None:
    store = service.store
    store.insert("c-old", messages(1, 3, "c-old"))
    store.revoke("c-old", 5, Revoke("alice", Role.MEMBER, "Alice", 7))  # a tag before its message
    store.purge("c-old", [6])
    clash = messages(2, 2, "c-old", content="something else")
    batches = {
        "c-old": [*messages(1, 1, "c-old"), *clash, *messages(4, 6, "c-old")],
        "c-new": messages(1, 250, "c-new"),  # several buckets that do not exist yet
        "c-none": [],
    }
    results = store.insert_many(batches)
    assert results["c-old"] == InsertResult(
        inserted=(4, 5), duplicates=(1,), conflicts=(2,), purged=(6,)
    )
    assert results["c-new"] == InsertResult(inserted=tuple(range(1, 251)))
    assert results["c-none"] == InsertResult()
    slots = store.get("c-old", [1, 2, 5, 6])
    assert slots[2].message == messages(2, 2, "c-old")[0]  # the stored fact was kept
    assert slots[5].message == messages(5, 5, "c-old")[0]
    assert slots[5].revoke is not None and slots[6].purged
    assert len(store.get("c-new", list(range(1, 251)))) == 250
    again = store.insert_many(batches)  # a redelivery changes nothing
    assert again["c-new"] == InsertResult(duplicates=tuple(range(1, 251)))


@needs(EARLY_TAGS)
def test_get_many_answers_what_get_answers_for_each_conversation(
    service: MessageService,
) -> None:
    fill(service)
    wanted = {
        conversation: list(range(1, service.max_seq(conversation) + 5))
        for conversation in CONVERSATIONS
    }
    wanted["never-written"] = [1, 2, 3]
    wanted["asked-for-nothing"] = []
    found = service.store.get_many(wanted)
    assert found == {conv: service.store.get(conv, seqs) for conv, seqs in wanted.items()}
    assert found["never-written"] == {} and found["asked-for-nothing"] == {}


@needs(EARLY_TAGS)
def test_bulk_watermark_reads_answer_what_the_single_reads_answer(
    service: MessageService,
) -> None:
    fill(service)
    seqs = service.seqs
    conversations = [*CONVERSATIONS, "never-written"]
    counters = seqs.counters_of(conversations)
    assert set(counters) == set(conversations)
    for conv in conversations:
        assert (counters[conv].max_seq, counters[conv].min_seq) == (
            seqs.max_seq(conv),
            seqs.min_seq(conv),
        )
    keys = [(conv, user) for conv in conversations for user in USERS]
    users = seqs.user_seqs_of(keys)
    assert set(users) == set(keys)
    for conv, user in keys:
        assert (users[conv, user].min_seq, users[conv, user].read_seq) == (
            seqs.user_min_seq(conv, user),
            seqs.read_seq(conv, user),
        )
    assert seqs.counters_of([]) == {} and seqs.user_seqs_of([]) == {}


def test_writes_inside_a_batch_are_kept_and_a_nested_batch_joins(
    service: MessageService,
) -> None:
    store, seqs = service.store, service.seqs
    with store.batch(), seqs.batch():
        store.insert_many({"c-batch": messages(1, 120, "c-batch")})
        with store.batch():
            store.delete_for("c-batch", [3], "bob")
            store.mark_read("c-batch", [4], "carol")
        seqs.raise_max_seq("c-batch", 120)
        seqs.raise_read_seq("c-batch", "carol", 4)
    slots = store.get("c-batch", list(range(1, 121)))
    assert len(slots) == 120
    assert slots[3].deleted_by == {"bob"} and slots[4].is_read
    assert seqs.max_seq("c-batch") == 120 and seqs.read_seq("c-batch", "carol") == 4


class _Boom(Exception):
    pass


def test_a_failure_inside_a_batch_propagates_and_sql_undoes_the_batch(
    service: MessageService, backend_config: dict[str, Any]
) -> None:
    store = service.store
    with pytest.raises(_Boom), store.batch():
        store.insert_many({"c-undone": messages(1, 5, "c-undone")})
        raise _Boom
    # A cached store does not batch (it invalidates after each committed write).
    cached = backend_config.get("cache", {}).get("backend", "none") != "none"
    transactional = backend_config["store"]["backend"].startswith("sql-") and not cached
    assert len(store.get("c-undone", [1, 2, 3, 4, 5])) == (0 if transactional else 5)
    again = store.insert("c-undone", messages(1, 5, "c-undone"))
    assert len(again.inserted) == (5 if transactional else 0)
