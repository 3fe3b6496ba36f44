"""Round trips of a send on the Mongo stores, counted at pymongo: counts, never times.

A fresh send (every client_msg_id new to the conversation) skips the lookup of earlier
claims: ``MongoFreshSends.store_fresh`` inserts the pending claims, allocates their seqs, and
the store's write of the messages records the seqs in the same command (the claims live in
the data collection; docs/sending.md, "A fresh send").
"""

from __future__ import annotations

import pytest

from imbucket.adapters.mongo.bucket import MongoBucketStore
from imbucket.app import MessageService
from imbucket.bench.instrument.probe import Probe
from imbucket.testing.factories import CONV, draft

MONGO_ROWS = [
    pytest.param("mongo_bucket_config", id="mongo-bucket"),
    pytest.param("mongo_row_config", id="mongo-row"),
]
pytestmark = pytest.mark.parametrize("backend_config", MONGO_ROWS, indirect=True)

# The pending claims' insertMany, the allocation's findAndModify, and the messages' write
# (into a bucket that exists: one update) led by the records of the claims' seqs.
FRESH = 3


@pytest.mark.parametrize("size", [1, 2, 99], ids=["one", "two", "99"])
def test_a_fresh_send_costs_the_claims_the_allocation_and_the_recording_insert(
    probed: tuple[Probe, MessageService], size: int
) -> None:
    probe, service = probed
    service.send(CONV, [draft(0)])
    drafts = [draft(n) for n in range(1, size + 1)]
    count = probe.count(lambda: service.send(CONV, drafts))
    assert (count.total, count.writes) == (FRESH, FRESH), count
    sent = service.send(CONV, drafts)  # a retry gets the same messages back
    assert [m.seq for m in sent] == list(range(2, size + 2))
    assert service.max_seq(CONV) == size + 1


def test_a_fresh_send_opening_a_bucket_costs_what_one_costs(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(n) for n in range(100)])  # seqs 1..100: the first bucket
    # Seq 101 is slot 0 of a new bucket: mongo-bucket's one update command fills the bucket
    # or, as here, creates it (an upsert that inserts only where there is none).
    count = probe.count(lambda: service.send(CONV, [draft(100)]))
    assert (count.total, count.writes) == (FRESH, FRESH), count
    assert [m.seq for m in service.send(CONV, [draft(100)])] == [101]
    assert service.max_seq(CONV) == 101


def test_a_batch_of_100_drafts_costs_what_one_costs(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(0)])
    drafts = [draft(n) for n in range(1, 101)]
    count = probe.count(lambda: service.send(CONV, drafts))
    # Seqs 2..101: mongo-bucket fills the first bucket and creates the second in one command.
    assert (count.total, count.writes) == (FRESH, FRESH), count
    sent = service.send(CONV, drafts)
    assert [m.seq for m in sent] == list(range(2, 102))
    assert [m.client_msg_id for m in sent] == [d.client_msg_id for d in drafts]


def test_a_batch_crossing_into_a_bucket_a_tag_write_created_costs_one_more_on_buckets(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(0)])
    service.store.delete_for(CONV, [101], "carol")  # creates the second bucket
    drafts = [draft(n) for n in range(1, 101)]
    count = probe.count(lambda: service.send(CONV, drafts))
    # The command fills the first bucket and finds the second there: its fill follows.
    buckets = 1 if isinstance(service.store, MongoBucketStore) else 0
    assert (count.total, count.writes) == (FRESH + buckets,) * 2, count
    assert [m.seq for m in service.send(CONV, drafts)] == list(range(2, 102))
    assert service.max_seq(CONV) == 101


def test_a_batch_of_100_drafts_into_an_existing_bucket_costs_what_one_costs(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(n) for n in range(100)])  # seqs 1..100: the first bucket
    service.store.delete_for(CONV, [101], "carol")  # creates the second (a row: seq 101's)
    drafts = [draft(n) for n in range(100, 200)]
    count = probe.count(lambda: service.send(CONV, drafts))
    assert (count.total, count.writes) == (FRESH, FRESH), count
    sent = service.send(CONV, drafts)
    assert [m.seq for m in sent] == list(range(101, 201))
    assert [m.client_msg_id for m in sent] == [d.client_msg_id for d in drafts]
    assert service.max_seq(CONV) == 200


def test_a_retry_writes_nothing_and_a_half_retry_takes_the_general_path(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(0)])
    first = service.send(CONV, [draft(1), draft(2)])
    count = probe.count(lambda: service.send(CONV, [draft(1), draft(2)]))
    # The claims' insert, refused whole (nothing written); the lookup; the originals.
    assert (count.total, count.writes) == (3, 1), count
    half: list[object] = []
    count = probe.count(lambda: half.extend(service.send(CONV, [draft(2), draft(3)])))
    assert [m.seq for m in half] == [first[1].seq, 4]  # type: ignore[attr-defined]
    assert service.max_seq(CONV) == 4
    # The claims' insert (draft-2 refused) and the delete of draft-3's claim that landed;
    # then the general path: the lookup, the read of draft-2's seq, draft-3's claim,
    # allocation and record, and its insert.
    assert count.total == 8, count
