"""Tag writes: round trips of revoke, delete_for_me, mark_read and purge, pinned per row.

Counted at the drivers (the memory engine by repository calls), the Redis cache's own
invalidation left out: counts, never times. The benchmark's tag-write target asks for at most 2 (the
permission read when one is needed, and one conditional write); where a write pays more, the
pin says how much and docs/buckets.md says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from sqlalchemy import text

from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.adapters.sql.schema import SPILLING
from imbucket.app import MessageService
from imbucket.bench.instrument.probe import Probe, probing
from imbucket.domain.budget import DEFAULT_MAX_DELETERS_PER_SLOT
from imbucket.domain.errors import SeqNotAllocated
from imbucket.domain.model import Actor, Role, Slot
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import Config, store_config
from tests.contract.conftest import spilling

CACHE = "redis"
OWNER = Actor("olivia", Role.OWNER)

# Each on a seq of its own, all holding a message sent by alice.
TAG_WRITES: dict[str, Callable[[MessageService], object]] = {
    "revoke": lambda service: service.revoke(CONV, 5, Actor("alice")),
    "delete_for_me": lambda service: service.delete_for_me(CONV, [6], "bob"),
    "mark_read": lambda service: service.mark_read(CONV, [7], "bob"),
    "purge": lambda service: service.purge(CONV, [8], OWNER),
}

# Beyond 2 (docs/buckets.md, "Round trips of a tag write"): mark_read also raises the
# reader's read seq. On SQL (sql-row, sql-bucket) that raise rides on the tag write's read,
# one statement; on MongoDB on the tag write's own update command (the user's document is in
# the data collection, adapters/mongo/mark_read_writes.py); behind a cache too, which then
# invalidates what changed. Memory raises it in a write of its own.
MARK_READ_SEPARATE = 3


def of_family(backend_config: Config, prefix: str) -> bool:
    """Whether the row is a store of that backend family, cached or not."""
    return bool(backend_config["store"]["backend"].startswith(prefix))


def expected(backend_config: Config, operation: str) -> int:
    """The pinned round trips of operation on this row."""
    if operation == "mark_read" and not reads_marks(backend_config):
        return MARK_READ_SEPARATE
    return 2


def reads_marks(backend_config: Config) -> bool:
    """Whether mark_read reads max_seq and the read seq with its slots (SQL, MongoDB)."""
    return of_family(backend_config, "sql-") or of_family(backend_config, "mongo-")


@pytest.mark.parametrize("operation", TAG_WRITES)
def test_a_tag_write_on_a_stored_message_costs_its_pinned_round_trips(
    probed: tuple[Probe, MessageService], backend_config: Config, operation: str
) -> None:
    probe, service = probed
    service.ingest(CONV, messages(1, 10))
    count = probe.count(lambda: TAG_WRITES[operation](service)).without(CACHE)
    assert count.total == expected(backend_config, operation), count
    assert count.writes >= 1, count
    # and it was applied: a repeat changes nothing
    assert TAG_WRITES[operation](service) in (False, 0)


# Seqs in three buckets at the default size of 100 (rows: three rows), all holding a message.
SPREAD = [5, 150, 250]
SPREAD_WRITES: dict[str, Callable[[MessageService], object]] = {
    "delete_for_me": lambda service: service.delete_for_me(CONV, SPREAD, "bob"),
    "mark_read": lambda service: service.mark_read(CONV, SPREAD, "bob"),
    "purge": lambda service: service.purge(CONV, SPREAD, OWNER),
}


@pytest.mark.parametrize("operation", SPREAD_WRITES)
def test_a_tag_write_over_several_buckets_writes_them_in_one_round_trip(
    probed: tuple[Probe, MessageService], backend_config: Config, operation: str
) -> None:
    """One read for every bucket, one conditional write for every bucket (patch_many)."""
    probe, service = probed
    service.ingest(CONV, messages(1, 300))
    count = probe.count(lambda: SPREAD_WRITES[operation](service)).without(CACHE)
    assert count.total == expected(backend_config, operation), count
    assert SPREAD_WRITES[operation](service) == 0  # applied to all three: a repeat changes nothing


def test_a_tag_write_on_an_empty_seq_adds_the_allocation_check(
    probed: tuple[Probe, MessageService],
) -> None:
    """Nothing stored yet: the seq's allocation is checked (max_seq), one more read.

    The write stays one: a bucket store whose read found no bucket creates it directly
    (seq 150 is in bucket 1, which nothing has written yet).
    """
    probe, service = probed
    service.ingest(CONV, messages(1, 2))
    service.seqs.raise_max_seq(CONV, 200)
    for seq in (3, 150):
        count = probe.count(lambda s=seq: service.delete_for_me(CONV, [s], "bob")).without(CACHE)
        assert count.reads == 2, (seq, count)
        assert count.writes == 1, (seq, count)


def test_mark_read_raises_the_read_seq_only_where_the_write_lands(
    probed: tuple[Probe, MessageService], backend_config: Config
) -> None:
    """The read seq moves with the tags, also when it rides on their read (SQL): up to an
    allocated seq, never when the allocation check refuses the write."""
    probe, service = probed
    service.ingest(CONV, messages(1, 10))
    service.seqs.raise_max_seq(CONV, 20)
    assert service.mark_read(CONV, [4, 15], "bob") == 2  # 15: no message yet, bob kept
    assert service.seqs.read_seq(CONV, "bob") == 15
    assert service.mark_read(CONV, [2, 3], "bob") == 2
    assert service.seqs.read_seq(CONV, "bob") == 15  # only ever raised
    with pytest.raises(SeqNotAllocated):
        service.mark_read(CONV, [5, 21], "bob")
    assert service.seqs.read_seq(CONV, "bob") == 15
    assert not service.store.get(CONV, [5])[5].read
    # An empty seq within max_seq: a fused read also reads max_seq, which answers the
    # allocation check (SQL, MongoDB); otherwise it is a read of its own.
    count = probe.count(lambda: service.mark_read(CONV, [19], "carol")).without(CACHE)
    separate = 0 if reads_marks(backend_config) else 1
    assert count.total == expected(backend_config, "mark_read") + separate, count
    assert service.seqs.read_seq(CONV, "carol") == 19


def test_mark_read_below_the_read_seq_leaves_it_alone(
    probed: tuple[Probe, MessageService], backend_config: Config
) -> None:
    """A read seq already beyond the seqs marked is not raised again: where the read reads
    it (SQL, MongoDB) the write is the tags' alone, 2 round trips; it never moves down."""
    probe, service = probed
    service.ingest(CONV, messages(1, 10))
    service.mark_read(CONV, [9], "bob")
    count = probe.count(lambda: service.mark_read(CONV, [4, 5], "bob")).without(CACHE)
    assert count.total == (2 if reads_marks(backend_config) else MARK_READ_SEPARATE), count
    assert service.seqs.read_seq(CONV, "bob") == 9
    assert all(slot.read for slot in service.store.get(CONV, [4, 5]).values())


# A deleter past a slot's inline cap goes to the side table. The first one rides on the patch
# that flags the slot (BucketRepository.patch_many: on SQL one statement, a data-modifying CTE
# on PostgreSQL and the bucket table's trigger on SQLite and MariaDB, on MongoDB one ordered
# update command of msg, which holds the entries too); the next ones find the slot flagged and
# write the side table alone.


@pytest.fixture
def probed_spilling(backend_config: Config) -> Iterator[tuple[Probe, MessageService]]:
    """``probed`` with one deleter kept inline per slot."""
    with probing() as probe:
        service = probe.open_service(spilling(backend_config))
        try:
            yield probe, service
        finally:
            service.close()


def test_a_deleter_past_the_inline_cap_costs_its_pinned_round_trips(
    probed_spilling: tuple[Probe, MessageService], backend_config: Config
) -> None:
    probe, service = probed_spilling
    service.ingest(CONV, messages(1, 10))
    assert service.delete_for_me(CONV, [6], "alice") == 1  # inline: the cap is 1
    added: list[int] = []
    for user in ("bob", "carol"):  # bob flags the slot and spills, carol spills
        count = probe.count(lambda u=user: added.append(service.delete_for_me(CONV, [6], u)))
        assert count.without(CACHE).total == 2, (user, count)
    assert added == [1, 1]
    assert service.delete_for_me(CONV, [6], "bob") == 0  # a set-add: a repeat changes nothing
    assert service.store.get(CONV, [6])[6].deleted_by == {"alice", "bob", "carol"}


ENGINES = {"sqlite": None, "postgres": "postgres_url", "mariadb": "mariadb_url"}
HOT_SEQ = 6


@pytest.mark.parametrize("encoding", ["compact", "openim"])
@pytest.mark.parametrize("engine", ENGINES)
def test_the_hot_delete_past_the_default_cap_is_one_statement_after_its_read(
    request: pytest.FixtureRequest, engine: str, encoding: str
) -> None:
    """sql-bucket at the default cap (1,000 inline): the 1,001st deleter is the read and one
    statement writing the flag and the side-table entry; the bucket's ``spilling`` column,
    which carries the entry to the trigger on SQLite and MariaDB, is cleared by it."""
    fixture = ENGINES[engine]
    url = "sqlite://" if fixture is None else request.getfixturevalue(fixture)
    config = store_config("sql-bucket", url)
    config["store"]["bucket_encoding"] = encoding
    with probing() as probe:
        service = probe.open_service(config)
        try:
            store = service.store
            assert isinstance(store, SqlBucketStore)
            repository, layout = store.repository, store.layout
            cap = store.budget.deleters_per_slot
            assert cap == DEFAULT_MAX_DELETERS_PER_SLOT
            inline = frozenset(f"user-{n:04d}" for n in range(cap))
            slots = {layout.slot_index(m.seq): Slot(message=m) for m in messages(1, 10)}
            index, doc_id = layout.slot_index(HOT_SEQ), layout.doc_id(CONV, HOT_SEQ)
            slots[index] = replace(slots[index], deleted_by=inline)
            assert repository.create_bucket(doc_id, slots)
            service.seqs.raise_max_seq(CONV, 10)
            added: list[int] = []
            for user in ("late-1", "late-2", "late-1"):
                count = probe.count(
                    lambda u=user: added.append(service.delete_for_me(CONV, [HOT_SEQ], u))
                )
                assert (count.total, count.writes) == (2, 1), (user, count)
            assert added == [1, 1, 0]
            (slot,) = repository.read({doc_id: [index]})[doc_id].values()
            assert slot.spilled and slot.deleted_by == inline
            assert repository.read_spilled({doc_id: [index]}) == {
                doc_id: {index: {"late-1", "late-2"}}
            }
            assert store.get(CONV, [HOT_SEQ])[HOT_SEQ].deleted_by == inline | {"late-1", "late-2"}
            if engine != "postgres":
                table = repository.schema.docs.name
                carried = repository.db.execute(text(f"SELECT {SPILLING} FROM {table}")).rows
                assert carried == [(None,)]
        finally:
            service.close()
