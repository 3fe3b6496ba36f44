"""Access patterns: round trips of the hot paths, counted at the drivers (never times).

Server engines are counted at their drivers, the memory engine by repository calls. A Redis
cache in front of a store may add its own round trips (an invalidation per write that changes
slots or watermarks, one lookup script per pull); the store side must stay within the bound
either way, and a cached hot read touches no store at all.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.app import MessageService
from imbucket.bench.instrument.probe import Probe
from imbucket.testing.factories import CONV, messages

CACHE = "redis"


# Both pulls straddle two buckets (91..110 and 11..110 of 110 messages).
HOT_READS = {
    "pull_latest(20)": lambda service: service.pull_latest(CONV, "bob", 20),
    "pull_range(100)": lambda service: service.pull_range(CONV, "bob", 11, 110),
}


@pytest.mark.parametrize("read", HOT_READS.values(), ids=HOT_READS.keys())
def test_hot_reads_cost_the_watermarks_plus_one_read(
    probed: tuple[Probe, MessageService], read: Callable[[MessageService], object]
) -> None:
    probe, service = probed
    service.ingest(CONV, messages(1, 110))
    read(service)  # warms a read-through cache and any lazy engine setup
    count = probe.count(lambda: read(service))
    assert 1 <= count.total <= 2, count
    if CACHE in count.drivers:  # the lookup script (EVALSHA, counted as a write) and nothing else
        assert count.drivers == {CACHE: 1}, count
    else:
        assert count.writes == 0, count


def test_100_message_insert_into_an_existing_bucket_is_one_store_write(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.ingest(CONV, messages(1, 100))
    service.seqs.raise_max_seq(CONV, 200)
    service.delete_for_me(CONV, [150], "bob")  # a tag makes seqs 101..200's bucket exist
    batch = messages(101, 200)
    count = probe.count(lambda: service.ingest(CONV, batch))
    # one write of the 100 messages and one raise of max_seq (an engine without RETURNING
    # on upserts reads the raised value back); behind a cache, each drops what it changed.
    # sql-bucket on MariaDB creates first a bucket whose slot 0 the batch takes (most
    # likely a new one): here it is there, so its fill follows (docs/sending.md).
    create_first = int(creates_first(service))
    store = count.without(CACHE)
    assert store.writes == 2 + create_first, count
    assert store.total <= 3 + create_first, count
    assert count.drivers.get(CACHE, 0) <= 2, count
    entries = service.pull_range(CONV, "alice", 101, 200)
    assert [e.seq for e in entries] == list(range(101, 201))


def creates_first(service: MessageService) -> bool:
    """Whether the service's store is sql-bucket on MariaDB (behind a cache or not)."""
    store = getattr(service.store, "store", service.store)
    return isinstance(store, SqlBucketStore) and store.repository.db.kind == "mariadb"


def test_clear_history_is_one_write_whatever_the_size(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.ingest("sg_small", messages(1, 3, "sg_small"))
    for first in range(1, 1_000, 100):
        service.ingest("sg_large", messages(first, first + 99, "sg_large"))
    small = probe.count(lambda: service.clear_history("sg_small", "bob"))
    large = probe.count(lambda: service.clear_history("sg_large", "bob"))
    # behind a cache, one more: the invalidation of bob's cached floor
    assert small.without(CACHE).writes == large.without(CACHE).writes == 1, (small, large)
    assert small.drivers.get(CACHE, 0) == large.drivers.get(CACHE, 0) <= 1, (small, large)
    assert small.without(CACHE).total == large.without(CACHE).total <= 3, (small, large)
    assert service.pull_latest("sg_large", "bob") == []
