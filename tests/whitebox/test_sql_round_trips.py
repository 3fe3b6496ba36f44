"""Statements per operation on the SQL stores, counted through SQLAlchemy's cursor events."""

from __future__ import annotations

import pytest

from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.app import MessageService
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.testing.factories import CONV, draft, messages
from imbucket.testing.rows import SQL, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(SQL), indirect=True)


def counter(service: MessageService) -> EngineStatements:
    return EngineStatements(service.store.engine)  # type: ignore[attr-defined]


@pytest.mark.parametrize("last", [20, 110], ids=["one-bucket", "two-buckets"])
def test_pull_latest_20_is_one_statement(service: MessageService, last: int) -> None:
    service.ingest(CONV, messages(1, last))
    with counter(service) as trips:
        entries = service.pull_latest(CONV, "bob", 20)
    assert [e.seq for e in entries] == list(range(last - 19, last + 1))
    # The watermarks and every requested slot of every touched bucket in one SELECT
    # (tests/whitebox/test_sql_pull_statements.py pins every kind of pull).
    assert (trips.total, trips.writes) == (1, 0), trips.statements


def test_pull_of_scattered_seqs_is_one_statement(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 350))
    service.delete_for_me(CONV, [7, 250], "bob")
    with counter(service) as trips:
        entries = service.pull(CONV, "bob", [3, 7, 120, 250, 301, 350])
    assert [e.seq for e in entries] == [3, 7, 120, 250, 301, 350]
    assert trips.total == 1, trips.statements


@pytest.mark.parametrize("size", [3, 250])
def test_clear_history_is_one_write_whatever_the_size(service: MessageService, size: int) -> None:
    service.ingest(CONV, messages(1, size))
    with counter(service) as trips:
        assert service.clear_history(CONV, "dave") == size + 1
    assert trips.writes == 1, trips.statements
    assert trips.total <= 3, trips.statements  # max_seq, the upsert (and MariaDB's read back)


def test_a_batch_opening_a_bucket_stores_it_in_one_write(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 100))
    with counter(service) as trips:
        assert service.ingest(CONV, messages(101, 150)).inserted == tuple(range(101, 151))
    # The batch's write and the raise of max_seq. A bucket store creates the missing bucket
    # in the write that would fill it; on MariaDB, whose upsert cannot tell a bucket left as
    # it was from a new one, a bucket whose slot 0 is pending is created first.
    assert (trips.total, trips.writes) == (2, 2), trips.statements


def test_redelivery_of_a_batch_costs_a_constant_number_of_statements(
    service: MessageService,
) -> None:
    batch = messages(1, 100)
    service.ingest(CONV, batch)
    with counter(service) as trips:
        assert service.ingest(CONV, batch).duplicates == tuple(range(1, 101))
    assert trips.total <= 4, trips.statements  # never one per message


# A fresh send: the claims and the allocation in one step (``adapters.sql.send``), then the
# insert (in one transaction on SQLite and MariaDB; BEGIN and COMMIT are not counted).
# MariaDB's step is two statements: the counter's upsert and the claims. On PostgreSQL
# the rows or buckets ride in the step's statement.
FRESH = {"postgresql": 1, "sqlite": 2, "mariadb": 3}


def kind_of(service: MessageService) -> str:
    return str(service.seqs.db.kind)  # type: ignore[attr-defined]


def fresh(service: MessageService) -> int:
    """The statements of a fresh send into buckets already there."""
    return FRESH[kind_of(service)]


@pytest.mark.parametrize("size", [1, 2, 99], ids=["one", "two", "99"])
def test_a_fresh_send_costs_the_step_and_the_insert(service: MessageService, size: int) -> None:
    service.send(CONV, [draft(0)])
    with counter(service) as trips:
        sent = service.send(CONV, [draft(n) for n in range(1, size + 1)])
    assert [m.seq for m in sent] == list(range(2, size + 2))
    assert (trips.total, trips.writes) == (fresh(service),) * 2, trips.statements


def test_a_fresh_send_opening_a_bucket_costs_what_one_costs(service: MessageService) -> None:
    service.send(CONV, [draft(n) for n in range(100)])  # seqs 1..100: the first bucket
    with counter(service) as trips:
        sent = service.send(CONV, [draft(100)])
    assert [m.seq for m in sent] == [101]
    # Seq 101 is slot 0 of a new bucket: created by the write that would fill it (MariaDB:
    # created first, the fill left for a bucket that is there already).
    assert (trips.total, trips.writes) == (fresh(service),) * 2, trips.statements


def test_a_fresh_send_into_a_bucket_a_tag_write_created_costs_one_more_on_mariadb(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(n) for n in range(100)])
    service.store.delete_for(CONV, [101], "carol")  # creates the second bucket
    with counter(service) as trips:
        sent = service.send(CONV, [draft(100), draft(101)])
    assert [m.seq for m in sent] == [101, 102]
    # MariaDB creates first a bucket whose slot 0 is pending: here it is there, so the
    # fill follows. Elsewhere the one write fills or creates.
    create_first = isinstance(service.store, SqlBucketStore) and kind_of(service) == "mariadb"
    assert trips.total == fresh(service) + create_first, trips.statements


def test_a_batch_of_100_drafts_costs_what_one_costs(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    with counter(service) as trips:
        sent = service.send(CONV, [draft(n) for n in range(1, 101)])
    assert [m.seq for m in sent] == list(range(2, 102))
    # Seqs 2..101: the first bucket and a new one. SQLite fills or creates both in one
    # upsert, PostgreSQL in the step's statement. MariaDB writes each: the fill of the
    # first, the create of the second (its upsert cannot say which rows it left alone).
    buckets = 0
    if isinstance(service.store, SqlBucketStore) and kind_of(service) == "mariadb":
        buckets = 1
    assert trips.total == fresh(service) + buckets, trips.statements


def test_a_retry_writes_nothing_and_a_half_retry_takes_the_general_path(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(0)])
    service.send(CONV, [draft(1), draft(2)])
    with counter(service) as trips:
        service.send(CONV, [draft(1), draft(2)])
    # The one-step claim finds draft-1 claimed and writes nothing (MariaDB: its counter's
    # upsert and the claims, rolled back); the lookup; the originals.
    step = 2 if kind_of(service) == "mariadb" else 1
    assert (trips.total, trips.writes) == (step + 2, step), trips.statements
    with counter(service) as trips:
        sent = service.send(CONV, [draft(2), draft(3)])
    assert [m.seq for m in sent] == [3, 4]
    # The failed step, the lookup, the original, then in one transaction the counter's lock
    # (not on SQLite), the claim, the allocation and the seqs' UPDATE (MariaDB reads the
    # claims and the allocation back), and the insert.
    general = {"sqlite": 7, "postgresql": 8, "mariadb": 11}
    assert trips.total == general[kind_of(service)], trips.statements
