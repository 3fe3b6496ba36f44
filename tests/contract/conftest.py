"""The backend table: every contract test runs once per row, unchanged.

A row names a fixture that returns the config mapping for ``open_service``; server rows
resolve their URL lazily (env, then testcontainers, then skip with a reason) and give each
test a namespace of its own. Later backends add a row here and a config fixture, never a
change to the tests.

Rows also list their capabilities. A test that needs one runs on the rows having it::

    @pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from app import MessageService, open_service
from imbucket_contract import selected
from ports.message_store import MessageStore
from tests.redis_cluster import RedisClusterProcesses
from tests.redis_server import redis_prefix, redis_url
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

Config = dict[str, Any]

PERSISTENT = "persistent"  # a second open_service on the same config sees the same data
SQL = "sql"  # the store exposes its SQLAlchemy ``engine`` (round trips can be counted)
BUCKETS = "buckets"  # the store is a BucketMessageStore: its ``repository`` can be tested
ROW_LAYOUT = "rows"  # the store is a RowMessageStore: its ``repository`` can be tested


@dataclass(frozen=True)
class Row:
    """One backend configuration the contract suite runs on."""

    id: str
    fixture: str  # a fixture returning the open_service config
    capabilities: frozenset[str] = frozenset()


# sqlite:// is in memory, so a second open_service sees a new, empty database.
ROWS = [
    Row("memory", "memory_config", frozenset({BUCKETS})),
    Row("sql-row-sqlite", "sql_row_sqlite_config", frozenset({SQL, ROW_LAYOUT})),
    Row("sql-row-postgres", "sql_row_postgres_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-row-mariadb", "sql_row_mariadb_config", frozenset({SQL, PERSISTENT, ROW_LAYOUT})),
    Row("sql-bucket-sqlite", "sql_bucket_sqlite_config", frozenset({SQL, BUCKETS})),
    Row("sql-bucket-postgres", "sql_bucket_postgres_config", frozenset({SQL, PERSISTENT, BUCKETS})),
    Row("sql-bucket-mariadb", "sql_bucket_mariadb_config", frozenset({SQL, PERSISTENT, BUCKETS})),
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
]

# `pytest --imbucket-backend NAME` (imbucket_contract.plugin, docs/plugins.md): NAME alone.
if (chosen := selected()) is not None:
    ROWS = [Row(chosen.name, "imbucket_selected_config", chosen.capabilities)]


def backends(*capabilities: str) -> list[Any]:
    """The rows having every one of capabilities, as parameters of ``backend_config``."""
    return [
        pytest.param(row.fixture, id=row.id)
        for row in ROWS
        if row.capabilities.issuperset(capabilities)
    ]


BACKENDS = backends()


def store_config(backend: str, url: str = "") -> Config:
    """An uncached store configuration."""
    return {"store": {"backend": backend, "url": url}, "cache": {"backend": "none"}}


@pytest.fixture
def memory_config() -> Config:
    return store_config("memory")


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for this test, dropped afterwards."""
    with postgres_schema(postgres_server()) as url:
        yield url


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A fresh MariaDB database for this test, dropped afterwards."""
    with mariadb_database(mariadb_server()) as url:
        yield url


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


def spilling(config: Config) -> Config:
    """config with a single deleter kept inline per slot."""
    return {**config, "store": {**config["store"], "max_deleters_per_slot": 1}}


@pytest.fixture
def memory_spill_config(memory_config: Config) -> Config:
    return spilling(memory_config)


@pytest.fixture
def sql_bucket_sqlite_spill_config(sql_bucket_sqlite_config: Config) -> Config:
    return spilling(sql_bucket_sqlite_config)


@pytest.fixture
def redis_cache() -> Iterator[Config]:
    """Cache config on the test Redis, under a key prefix of its own (removed afterwards)."""
    url = redis_url()
    with redis_prefix(url) as prefix:
        yield {"backend": "redis", "url": url, "key_prefix": prefix}


@pytest.fixture
def redis_cluster_cache(redis_cluster: RedisClusterProcesses) -> Iterator[Config]:
    """Cache config on this run's Redis Cluster, under a key prefix of its own."""
    with redis_prefix(redis_cluster.url, cluster=True) as prefix:
        yield {"backend": "redis-cluster", "url": redis_cluster.url, "key_prefix": prefix}


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


@pytest.fixture(params=BACKENDS)
def backend_config(request: pytest.FixtureRequest) -> Config:
    """The config of one backend row."""
    config: Config = request.getfixturevalue(request.param)
    return config


@pytest.fixture
def open_backend(backend_config: Config) -> Iterator[Any]:
    """Open more services on the same backend (e.g. one per thread or a re-open)."""
    opened: list[MessageService] = []

    def opener(**overrides: Any) -> MessageService:
        config = {**backend_config, **overrides}
        service = open_service(config)
        opened.append(service)
        return service

    yield opener
    for service in opened:
        service.close()


@pytest.fixture
def service(open_backend: Any) -> MessageService:
    """A MessageService on a clean backend."""
    svc: MessageService = open_backend()
    return svc


@pytest.fixture
def store(service: MessageService) -> MessageStore:
    """The MessageStore behind the service."""
    return service.store
