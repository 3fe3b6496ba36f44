"""Pages a pull and a tag write touch, counted by each SQL engine itself: counts, never times.

The pins are the pages an engine asked its buffer for (touched: hit or read), which do not
depend on what the cache holds: 300 messages of one conversation, then one pull of 100 of
them, or one member deleting one message for themselves. PostgreSQL's counts are its own
tables' (pg_statio_user_tables of the test's schema); SQLite's its connections' page-cache
requests. InnoDB's counters are server-wide, so MariaDB is pinned on a private instance the
session starts (``imbucket.bench.instances``), quiet but for the test, and stops at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

import pytest
from sqlalchemy import text

from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.app import MessageService, open_service
from imbucket.bench import instances
from imbucket.bench.instrument.pages import PageCount, PageMeter, page_meter
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import Config, store_config
from tests.sql_servers import mariadb_database

OPERATIONS: dict[str, Callable[[MessageService], object]] = {
    "pull_range": lambda service: service.pull_range(CONV, "bob", 101, 200),
    "pull_scattered": lambda service: service.pull(CONV, "bob", [5, 105, 205]),
    "delete_for_me": lambda service: service.delete_for_me(CONV, [150], "bob"),
}

# Pages touched per operation, by (store, engine). A bucket pull reads one bucket where rows
# take a page run and an index walk, and one slot of each of three buckets where rows take
# three index probes (on PostgreSQL one key lookup per seq in each table, a plan no generic
# plan can turn into a walk of the conversation); a bucket tag write rewrites the whole bucket.
PINNED: dict[tuple[str, str], dict[str, int]] = {
    ("sql-row", "sqlite"): {"pull_range": 16, "pull_scattered": 26, "delete_for_me": 10},
    ("sql-bucket", "sqlite"): {"pull_range": 11, "pull_scattered": 23, "delete_for_me": 26},
    ("sql-row", "postgresql"): {"pull_range": 19, "pull_scattered": 40, "delete_for_me": 16},
    ("sql-bucket", "postgresql"): {"pull_range": 14, "pull_scattered": 25, "delete_for_me": 6},
    ("sql-row", "mysql"): {"pull_range": 19, "pull_scattered": 27, "delete_for_me": 13},
    ("sql-bucket", "mysql"): {"pull_range": 6, "pull_scattered": 12, "delete_for_me": 16},
}
# InnoDB's purge thread sometimes touches one undo page while a write commits: a write's pin
# on MariaDB is its count or one more.
SLACK: dict[tuple[str, str], int] = {("mysql", "delete_for_me"): 1}
# InnoDB's background work (purge, dictionary upkeep) can still land inside a quiet window,
# and it only ever adds pages: MariaDB's pin is the fewest of up to this many measurements,
# each on a fresh database.
MEASUREMENTS = 3


def _quiet(meter: PageMeter, seconds: float = 20.0) -> None:
    """Wait (bounded) until the engine's background work (InnoDB purge) stops moving the
    counters, so that the pin counts the operation only."""
    deadline = time.monotonic() + seconds
    meter.begin()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if meter.pages().touched == 0:
            return
        meter.begin()
    raise AssertionError(f"the engine's page counters kept moving for {seconds} s")


@pytest.fixture(scope="session")
def private_mariadb() -> Iterator[instances.Instance]:
    """A MariaDB of this session's own (16 MB buffer pool), stopped and removed at the end."""
    instance = instances.start("mariadb", 16 * 1024 * 1024)
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def fresh_database(request: pytest.FixtureRequest) -> Callable[[], AbstractContextManager[str]]:
    """Makes the context that yields the URL of a database to measure on: a new one on each
    call on MariaDB; the test's own on SQLite and PostgreSQL, which are measured once."""
    if request.param == "sqlite":
        return lambda: nullcontext("sqlite://")
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return lambda: nullcontext(url)
    server = request.getfixturevalue("private_mariadb").url
    return lambda: mariadb_database(server)


def _pages_of(url: str, store: str, operation: str) -> PageCount:
    """Pages the operation touched on a conversation of 300 messages, stored at url."""
    with open_service(store_config(store, url)) as service:
        service.ingest(CONV, messages(1, 300))
        meter = page_meter(service.store)
        if url.startswith("mysql"):
            _quiet(meter)
        meter.begin()
        OPERATIONS[operation](service)
        count = meter.pages()
        meter.close()
    return count


@pytest.mark.parametrize("store", ["sql-row", "sql-bucket"])
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_pull_and_a_tag_write_touch_their_pinned_pages(
    fresh_database: Callable[[], AbstractContextManager[str]], store: str, operation: str
) -> None:
    counts: list[PageCount] = []
    for _ in range(MEASUREMENTS):
        with fresh_database() as url:
            counts.append(_pages_of(url, store, operation))
        engine = url.split(":", 1)[0].split("+", 1)[0]
        pinned = PINNED[(store, engine)][operation]
        highest = pinned + SLACK.get((engine, operation), 0)
        fewest = min(count.touched for count in counts)
        if engine != "mysql" or fewest <= highest:
            break
    assert pinned <= fewest <= highest, counts


def test_postgresql_buckets_are_compressed_with_lz4_also_in_a_store_created_before(
    postgres_url: str,
) -> None:
    """A pull decompresses each bucket it touches: the bucket column is set to lz4 at every
    open (the test server has lz4), so a table created with pglz gains it too."""

    def compression(service: MessageService, sql: str = "") -> list[str]:
        store = service.store
        assert isinstance(store, SqlBucketStore)
        table = store.schema.docs.name
        with store.engine.begin() as connection:
            if sql:
                connection.execute(text(sql.format(table=table)))
            query = f"SELECT DISTINCT pg_column_compression(msgs) FROM {table}"
            return [row[0] for row in connection.execute(text(query))]

    config: Config = store_config("sql-bucket", postgres_url)
    with open_service(config) as service:
        service.ingest(CONV, messages(1, 300))
        assert compression(service) == ["lz4"]
        compression(service, "ALTER TABLE {table} ALTER COLUMN msgs SET COMPRESSION pglz")
        rewrite = "UPDATE {table} SET msgs = CAST(CAST(msgs AS text) AS jsonb)"
        assert compression(service, rewrite) == ["pglz"]
    with open_service(config) as service:
        service.delete_for_me(CONV, list(range(1, 301)), "bob")  # rewrites every bucket
        assert compression(service) == ["lz4"]
