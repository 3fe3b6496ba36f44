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
    # in the write that would fill it, except on MariaDB, whose upsert cannot tell a bucket
    # left as it was from a new one: there the fill finds no bucket, a read says it is
    # missing, and the create follows.
    store = service.store
    on_mariadb = isinstance(store, SqlBucketStore) and store.repository.db.kind == "mariadb"
    assert trips.writes == (3 if on_mariadb else 2), trips.statements
    assert trips.total == trips.writes + (1 if on_mariadb else 0), trips.statements


def test_redelivery_of_a_batch_costs_a_constant_number_of_statements(
    service: MessageService,
) -> None:
    batch = messages(1, 100)
    service.ingest(CONV, batch)
    with counter(service) as trips:
        assert service.ingest(CONV, batch).duplicates == tuple(range(1, 101))
    assert trips.total <= 4, trips.statements  # never one per message


def test_send_costs_a_few_statements_and_a_retry_writes_nothing(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    with counter(service) as trips:
        service.send(CONV, [draft(1), draft(2)])
    # The claim lookup; in one transaction (BEGIN and COMMIT, not counted here) the claim,
    # the allocation and the UPDATE recording the claims' seqs; the insert. MariaDB reads
    # the claims and the allocated value back in two more SELECTs.
    assert trips.writes == 4, trips.statements
    assert trips.total <= 7, trips.statements
    with counter(service) as trips:
        service.send(CONV, [draft(1), draft(2)])
    assert (trips.total, trips.writes) == (2, 0), trips.statements  # lookup, read the originals
