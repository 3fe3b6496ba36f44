"""The backend table: every contract test runs once per row, unchanged.

This directory is the contract suite's one home; the wheel ships it as
``imbucket.testing.suite``, where ``pytest --imbucket-backend NAME`` runs it on one backend
(docs/plugins.md). So nothing here imports from ``tests``: the rows name fixtures, and the
fixtures that reach a server (``postgres_url``, ``mariadb_url``, ``mongo_url``,
``galera_url``, ``pg_ha_url``, ``redis_cache``, ``redis_cluster_cache``) live in
``tests/conftest.py``.

A row names a fixture that returns the config mapping for ``open_service``; server rows
resolve their URL lazily (env, then testcontainers, then skip with a reason) and give each
test a namespace of its own. Later backends add a row here and a config fixture, never a
change to the tests. Rows also list their capabilities (``imbucket.testing.rows``); a test
that needs one runs on the rows having it::

    @pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from imbucket.app import MessageService, open_service
from imbucket.ports.message_store import MessageStore
from imbucket.testing import selected
from imbucket.testing.aio import BlockingService, LoopThread
from imbucket.testing.rows import (
    ASYNC_API,
    BUCKETS,
    PERSISTENT,
    ROW_LAYOUT,
    SQL,
    Config,
    Row,
    backends,
    on_asyncio,
    store_config,
    use,
)

# sqlite:// is in memory, so a second open_service sees a new, empty database.
ROWS = [
    Row("memory", "memory_config", frozenset({BUCKETS})),
    Row("sql-row-sqlite", "sql_row_sqlite_config", frozenset({SQL, ROW_LAYOUT})),
    Row("sql-row-postgres", "sql_row_postgres_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-row-mariadb", "sql_row_mariadb_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-bucket-sqlite", "sql_bucket_sqlite_config", frozenset({SQL, BUCKETS})),
    Row("sql-bucket-postgres", "sql_bucket_postgres_config", frozenset({SQL, PERSISTENT, BUCKETS})),
    Row("sql-bucket-mariadb", "sql_bucket_mariadb_config", frozenset({SQL, PERSISTENT, BUCKETS})),
    # Real distributed engines the session starts itself: Galera (every node takes writes,
    # each test's connections spread over them) and PostgreSQL under Patroni (synchronous
    # replication; the URL names every member and connects to the primary).
    Row("sql-row-galera", "sql_row_galera_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-bucket-galera", "sql_bucket_galera_config", frozenset({SQL, PERSISTENT, BUCKETS})),
    Row("sql-row-pg-ha", "sql_row_pg_ha_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-bucket-pg-ha", "sql_bucket_pg_ha_config", frozenset({SQL, PERSISTENT, BUCKETS})),
    Row("mongo-bucket", "mongo_bucket_config", frozenset({PERSISTENT, BUCKETS})),
    Row("mongo-row", "mongo_row_config", frozenset({PERSISTENT, ROW_LAYOUT})),
    Row("memory+redis", "memory_redis_config"),
    Row("sql-row-postgres+redis", "sql_row_postgres_redis_config", frozenset({PERSISTENT})),
    Row("sql-bucket-sqlite+redis", "sql_bucket_sqlite_redis_config"),
    Row("memory+redis-cluster", "memory_redis_cluster_config"),
    Row("sql-bucket-sqlite+redis-cluster", "sql_bucket_sqlite_redis_cluster_config"),
    # One deleter per slot inline: every further deleter goes through the side table.
    Row("memory-spill", "memory_spill_config", frozenset({BUCKETS})),
    Row("sql-bucket-sqlite-spill", "sql_bucket_sqlite_spill_config", frozenset({SQL, BUCKETS})),
    # OpenIM's bucket encoding (named fields, every slot written out) next to the compact one.
    Row("sql-bucket-sqlite-openim", "sql_bucket_sqlite_openim_config", frozenset({SQL, BUCKETS})),
    Row(
        "sql-bucket-postgres-openim",
        "sql_bucket_postgres_openim_config",
        frozenset({SQL, PERSISTENT, BUCKETS}),
    ),
]
# The same rows on the asyncio API (imbucket.aio): every test, unchanged, through a blocking
# facade that runs each call as a task on an event loop (imbucket.testing.aio).
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
    Row(f"aio:{row.id}", f"aio_{row.fixture}", row.capabilities)
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


def _sql_config(name: str, backend: str, url_fixture: str | None) -> Any:
    def config(request: pytest.FixtureRequest) -> Config:
        url = request.getfixturevalue(url_fixture) if url_fixture else "sqlite://"
        return store_config(backend, url)

    return pytest.fixture(name=name)(config)


sql_row_sqlite_config = _sql_config("sql_row_sqlite_config", "sql-row", None)
sql_row_postgres_config = _sql_config("sql_row_postgres_config", "sql-row", "postgres_url")
sql_row_mariadb_config = _sql_config("sql_row_mariadb_config", "sql-row", "mariadb_url")
sql_bucket_sqlite_config = _sql_config("sql_bucket_sqlite_config", "sql-bucket", None)
sql_bucket_postgres_config = _sql_config("sql_bucket_postgres_config", "sql-bucket", "postgres_url")
sql_bucket_mariadb_config = _sql_config("sql_bucket_mariadb_config", "sql-bucket", "mariadb_url")
sql_row_galera_config = _sql_config("sql_row_galera_config", "sql-row", "galera_url")
sql_bucket_galera_config = _sql_config("sql_bucket_galera_config", "sql-bucket", "galera_url")
sql_row_pg_ha_config = _sql_config("sql_row_pg_ha_config", "sql-row", "pg_ha_url")
sql_bucket_pg_ha_config = _sql_config("sql_bucket_pg_ha_config", "sql-bucket", "pg_ha_url")


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


def _on_asyncio(name: str) -> Any:
    def config(request: pytest.FixtureRequest) -> Config:
        return on_asyncio(request.getfixturevalue(name.removeprefix("aio_")))

    return pytest.fixture(name=name)(config)


for _row in ROWS:
    if _row.id.startswith("aio:"):
        globals()[_row.fixture] = _on_asyncio(_row.fixture)


@pytest.fixture(params=BACKENDS)
def backend_config(request: pytest.FixtureRequest) -> Config:
    """The config of one backend row."""
    config: Config = request.getfixturevalue(request.param)
    return config


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
