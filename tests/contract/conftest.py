"""The backend table: every contract test runs once per row, unchanged.

This directory is the contract suite's one home; the wheel ships it as
``imbucket.testing.suite``, where ``pytest --imbucket-backend NAME`` runs it on one backend
(docs/plugins.md). So nothing here imports from ``tests``: the rows name fixtures, and the
fixtures that reach a server (``postgres_url``, ``mariadb_url``, ``mongo_url``,
``galera_url``, ``pg_ha_url``, ``redis_cache``, ``redis_cluster_cache``, ``openim_redis``) live in
``tests/conftest.py``.

A row names a fixture that returns the config mapping for ``open_service``; server rows
resolve their URL lazily (env, then testcontainers, then skip with a reason) and give each
test a namespace of its own. Later backends add a row here and a config fixture, never a
change to the tests. Rows also list their capabilities (``imbucket.testing.rows``); a test
that needs one runs on the rows having it::

    @pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from imbucket.app import MessageService, open_service
from imbucket.ports.message_store import MessageStore
from imbucket.testing import selected
from imbucket.testing.aio import BlockingService, LoopThread
from imbucket.testing.rows import (
    ASYNC_API,
    BUCKETS,
    NEEDS,
    PERSISTENT,
    ROW_LAYOUT,
    SLOW,
    SQL,
    Config,
    Row,
    backends,
    examples,
    having,
    on_asyncio,
    row_of,
    runs_on,
    store_config,
    use,
)

# sqlite:// is in memory, so a second open_service sees a new, empty database.
ROWS = [
    Row("memory", "memory_config", having(BUCKETS)),
    Row("sql-row-sqlite", "sql_row_sqlite_config", having(SQL, ROW_LAYOUT)),
    Row("sql-row-postgres", "sql_row_postgres_config", having(SQL, PERSISTENT, ROW_LAYOUT)),
    Row("sql-row-mariadb", "sql_row_mariadb_config", having(SQL, PERSISTENT, ROW_LAYOUT)),
    Row("sql-bucket-sqlite", "sql_bucket_sqlite_config", having(SQL, BUCKETS)),
    Row("sql-bucket-postgres", "sql_bucket_postgres_config", having(SQL, PERSISTENT, BUCKETS)),
    Row("sql-bucket-mariadb", "sql_bucket_mariadb_config", having(SQL, PERSISTENT, BUCKETS)),
    # Real distributed engines the session starts itself: Galera (every node takes writes,
    # each test's connections spread over them) and PostgreSQL under Patroni (synchronous
    # replication; the URL names every member and connects to the primary). Every write
    # waits for other nodes, so they are SLOW: the heaviest tests run a share of their examples.
    Row("sql-row-galera", "sql_row_galera_config", having(SQL, PERSISTENT, ROW_LAYOUT, SLOW)),
    Row("sql-bucket-galera", "sql_bucket_galera_config", having(SQL, PERSISTENT, BUCKETS, SLOW)),
    Row("sql-row-pg-ha", "sql_row_pg_ha_config", having(SQL, PERSISTENT, ROW_LAYOUT, SLOW)),
    Row("sql-bucket-pg-ha", "sql_bucket_pg_ha_config", having(SQL, PERSISTENT, BUCKETS, SLOW)),
    Row("mongo-bucket", "mongo_bucket_config", having(PERSISTENT, BUCKETS)),
    Row("mongo-row", "mongo_row_config", having(PERSISTENT, ROW_LAYOUT)),
    # OpenIM's own layout, written as OpenIM writes it (docs/openim.md): none of the
    # capabilities OpenIM has no place for.
    Row("openim-mongo", "openim_mongo_config", frozenset({PERSISTENT, BUCKETS})),
    Row("memory+redis", "memory_redis_config", having()),
    Row("sql-row-postgres+redis", "sql_row_postgres_redis_config", having(PERSISTENT)),
    Row("sql-bucket-sqlite+redis", "sql_bucket_sqlite_redis_config", having()),
    Row("memory+redis-cluster", "memory_redis_cluster_config", having()),
    Row("sql-bucket-sqlite+redis-cluster", "sql_bucket_sqlite_redis_cluster_config", having()),
    # One deleter per slot inline: every further deleter goes through the side table.
    Row("memory-spill", "memory_spill_config", having(BUCKETS)),
    Row("sql-bucket-sqlite-spill", "sql_bucket_sqlite_spill_config", having(SQL, BUCKETS)),
    # OpenIM's bucket encoding (named fields, every slot written out) next to the compact one.
    Row("sql-bucket-sqlite-openim", "sql_bucket_sqlite_openim_config", having(SQL, BUCKETS)),
    Row(
        "sql-bucket-postgres-openim",
        "sql_bucket_postgres_openim_config",
        having(SQL, PERSISTENT, BUCKETS),
    ),
]
# The same rows on the asyncio API (imbucket.aio): every test, unchanged, through a blocking
# facade that runs each call as a task on an event loop (imbucket.testing.aio). The rules
# they run are the sync rows' own code, so the server rows among them are SLOW: the heaviest
# tests run a share of their examples there.
ASYNC_ROWS = (
    "memory",
    *(
        f"sql-{layout}-{engine}"
        for layout in ("row", "bucket")
        for engine in ("sqlite", "postgres", "mariadb")
    ),
    # The Redis cache on redis.asyncio, single node and cluster, in front of memory and SQL.
    "memory+redis",
    "sql-row-postgres+redis",
    "memory+redis-cluster",
    # MongoDB on PyMongo's AsyncMongoClient.
    "mongo-bucket",
    "mongo-row",
)
ROWS += [
    Row(
        f"aio:{row.id}",
        f"aio_{row.fixture}",
        row.capabilities | ({SLOW} if PERSISTENT in row.capabilities else set()),
    )
    for row in ROWS
    if row.id in ASYNC_ROWS
]

# `pytest --imbucket-backend NAME` (imbucket.testing.plugin, docs/plugins.md): NAME alone.
if (chosen := selected()) is not None:
    ROWS = [Row(chosen.name, "imbucket_selected_config", chosen.capabilities)]
use(ROWS)
BACKENDS = backends()


@pytest.fixture
def memory_config() -> Config:
    return store_config("memory")


def _sql_config(name: str, backend: str, url_fixture: str | None, **store: Any) -> Any:
    def config(request: pytest.FixtureRequest) -> Config:
        url = request.getfixturevalue(url_fixture) if url_fixture else "sqlite://"
        found = store_config(backend, url)
        found["store"].update(store)
        return found

    return pytest.fixture(name=name)(config)


sql_row_sqlite_config = _sql_config("sql_row_sqlite_config", "sql-row", None)
sql_row_postgres_config = _sql_config("sql_row_postgres_config", "sql-row", "postgres_url")
sql_row_mariadb_config = _sql_config("sql_row_mariadb_config", "sql-row", "mariadb_url")
sql_bucket_sqlite_config = _sql_config("sql_bucket_sqlite_config", "sql-bucket", None)
sql_bucket_postgres_config = _sql_config("sql_bucket_postgres_config", "sql-bucket", "postgres_url")
sql_bucket_mariadb_config = _sql_config("sql_bucket_mariadb_config", "sql-bucket", "mariadb_url")
# A cluster commits synchronously to its peers: on a loaded 2-core machine the largest batch
# (about 71 MB) can take longer than the default statement timeout to be acknowledged.
_CLUSTER = {"statement_timeout_seconds": 20}
sql_row_galera_config = _sql_config("sql_row_galera_config", "sql-row", "galera_url", **_CLUSTER)
sql_bucket_galera_config = _sql_config(
    "sql_bucket_galera_config", "sql-bucket", "galera_url", **_CLUSTER
)
sql_row_pg_ha_config = _sql_config("sql_row_pg_ha_config", "sql-row", "pg_ha_url", **_CLUSTER)
sql_bucket_pg_ha_config = _sql_config(
    "sql_bucket_pg_ha_config", "sql-bucket", "pg_ha_url", **_CLUSTER
)


def spilling(config: Config) -> Config:
    """config with a single deleter kept inline per slot."""
    return {**config, "store": {**config["store"], "max_deleters_per_slot": 1}}


def openim(config: Config) -> Config:
    """config with buckets in OpenIM's encoding."""
    return {**config, "store": {**config["store"], "bucket_encoding": "openim"}}


@pytest.fixture
def sql_bucket_sqlite_openim_config(sql_bucket_sqlite_config: Config) -> Config:
    return openim(sql_bucket_sqlite_config)


@pytest.fixture
def sql_bucket_postgres_openim_config(sql_bucket_postgres_config: Config) -> Config:
    return openim(sql_bucket_postgres_config)


@pytest.fixture
def memory_spill_config(memory_config: Config) -> Config:
    return spilling(memory_config)


@pytest.fixture
def sql_bucket_sqlite_spill_config(sql_bucket_sqlite_config: Config) -> Config:
    return spilling(sql_bucket_sqlite_config)


@pytest.fixture
def memory_redis_cluster_config(memory_config: Config, redis_cluster_cache: Config) -> Config:
    return {**memory_config, "cache": redis_cluster_cache}


@pytest.fixture
def sql_bucket_sqlite_redis_cluster_config(
    sql_bucket_sqlite_config: Config, redis_cluster_cache: Config
) -> Config:
    return {**sql_bucket_sqlite_config, "cache": redis_cluster_cache}


@pytest.fixture
def memory_redis_config(memory_config: Config, redis_cache: Config) -> Config:
    return {**memory_config, "cache": redis_cache}


@pytest.fixture
def sql_row_postgres_redis_config(sql_row_postgres_config: Config, redis_cache: Config) -> Config:
    return {**sql_row_postgres_config, "cache": redis_cache}


@pytest.fixture
def sql_bucket_sqlite_redis_config(sql_bucket_sqlite_config: Config, redis_cache: Config) -> Config:
    return {**sql_bucket_sqlite_config, "cache": redis_cache}


@pytest.fixture
def mongo_bucket_config(mongo_url: str) -> Config:
    return store_config("mongo-bucket", mongo_url)


@pytest.fixture
def mongo_row_config(mongo_url: str) -> Config:
    return store_config("mongo-row", mongo_url)


@pytest.fixture
def openim_mongo_config(mongo_url: str, openim_redis: str) -> Config:
    query = urlencode({"openim_redis": openim_redis, "openim_writes": "true"})
    separator = "&" if "?" in mongo_url else "?"
    return store_config("openim-mongo", f"{mongo_url}{separator}{query}")


def _on_asyncio(name: str) -> Any:
    def config(request: pytest.FixtureRequest) -> Config:
        return on_asyncio(request.getfixturevalue(name.removeprefix("aio_")))

    return pytest.fixture(name=name)(config)


for _row in ROWS:
    if _row.id.startswith("aio:"):
        globals()[_row.fixture] = _on_asyncio(_row.fixture)


def pytest_configure(config: pytest.Config) -> None:
    """The marker ``needs`` (``imbucket.testing.rows.needs``)."""
    config.addinivalue_line("markers", f"{NEEDS}(*capabilities): runs on the rows having them")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect each test marked ``needs`` on the rows lacking one of its capabilities."""
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        fixture = callspec.params.get("backend_config") if callspec is not None else None
        needed = {c for mark in item.iter_markers(NEEDS) for c in mark.args}
        # An empty parameter set (no row has the capability) stays pytest's skip.
        lacking = isinstance(fixture, str) and needed and not runs_on(fixture, needed)
        (dropped if lacking else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=BACKENDS)
def backend_config(request: pytest.FixtureRequest) -> Config:
    """The config of one backend row."""
    config: Config = request.getfixturevalue(request.param)
    return config


@pytest.fixture
def row_examples(request: pytest.FixtureRequest) -> Callable[[int], int]:
    """How many of count examples a heavy test runs on this test's row (``rows.examples``)."""
    row = row_of(request.node.callspec.params["backend_config"])
    return lambda count: examples(count, row.capabilities)


@pytest.fixture
def open_backend(backend_config: Config) -> Iterator[Any]:
    """Open more services on the same backend (e.g. one per thread or a re-open)."""
    opened: list[Any] = []
    loops: list[LoopThread] = []

    def opener(**overrides: Any) -> Any:
        config = {**backend_config, **overrides}
        service: Any
        if config.pop(ASYNC_API, False):
            loops[:] = loops or [LoopThread()]
            service = BlockingService.open(config, loops[0])
        else:
            service = open_service(config)
        opened.append(service)
        return service

    yield opener
    for service in opened:
        service.close()
    for loop in loops:
        loop.close()


@pytest.fixture
def service(open_backend: Any) -> MessageService:
    """A MessageService on a clean backend."""
    svc: MessageService = open_backend()
    return svc


@pytest.fixture
def store(service: MessageService) -> MessageStore:
    """The MessageStore behind the service."""
    return service.store
