"""Session-wide test setup: the fixtures that reach a server (one database, schema or key
prefix per test), servers started on demand stopped at the end, and a summary line saying on
which MongoDB the Mongo tests ran."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

import pytest
from sqlalchemy import make_url

from imbucket.testing.rows import Config
from tests import galera_cluster as galera
from tests import patroni_cluster as patroni
from tests.mongo import emulated_mongo, mongo_database, summary, where_mongo_ran
from tests.redis_cluster import RedisClusterProcesses, start_cluster
from tests.redis_server import redis_database, redis_prefix, redis_url
from tests.servers import close_containers
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

# Set on every test that asked for a MongoDB database: its server, or NO_SERVER. A report
# property, so that it reaches the controller under pytest-xdist (workers run the fixtures).
MONGO_SERVER = "imbucket_mongo_server"
NO_SERVER = ""


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield from close_containers()


@pytest.fixture
def mongo_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A MongoDB database of this test's own (skips without a server)."""
    request.node.user_properties.append((MONGO_SERVER, NO_SERVER))
    with mongo_database() as url:
        request.node.user_properties[-1] = (MONGO_SERVER, where_mongo_ran())
        yield url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line naming the MongoDB servers and how many Mongo tests passed, failed, skipped."""
    outcomes: Counter[str] = Counter()
    servers: set[str] = set()
    for outcome in ("passed", "failed", "error", "skipped"):
        nodes = set()
        for report in terminalreporter.stats.get(outcome, []):
            found = dict(getattr(report, "user_properties", ())).get(MONGO_SERVER)
            if found is not None:
                nodes.add(report.nodeid)
                servers |= {found} - {NO_SERVER}
        outcomes[outcome] = len(nodes)
    if sum(outcomes.values()):
        terminalreporter.write_sep("-", "MongoDB")
        terminalreporter.write_line(summary(dict(outcomes), servers))


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterProcesses]:
    """A Redis Cluster of this run's own (3 masters, 3 replicas), stopped at the end."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def galera_cluster() -> Iterator[galera.GaleraCluster]:
    """A MariaDB Galera cluster of this run's own (3 nodes), stopped at the end."""
    cluster = galera.start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def patroni_cluster() -> Iterator[patroni.PatroniCluster]:
    """PostgreSQL under Patroni (a primary, a sync standby, a replica), stopped at the end."""
    cluster = patroni.start_cluster()
    yield cluster
    cluster.stop()


_turns = itertools.count()


@pytest.fixture
def galera_url(galera_cluster: galera.GaleraCluster) -> Iterator[str]:
    """A fresh database on the Galera cluster; the URL names every node, a different one
    first per test, so that the test's connections spread over the nodes."""
    first = next(_turns) % len(galera_cluster.nodes)
    node = galera_cluster.nodes[first]
    with mariadb_database(galera_cluster.url(node)) as url:
        yield galera_cluster.urls(make_url(url).database or "", first)


@pytest.fixture
def pg_ha_url(patroni_cluster: patroni.PatroniCluster) -> Iterator[str]:
    """A fresh schema on the Patroni cluster's primary (a multi-host, read-write URL)."""
    with postgres_schema(patroni_cluster.url) as url:
        yield url


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


@pytest.fixture
def redis_cache() -> Iterator[Config]:
    """Cache config on the test Redis, under a key prefix of its own (removed afterwards)."""
    url = redis_url()
    with redis_prefix(url) as prefix:
        yield {"backend": "redis", "url": url, "key_prefix": prefix}


@pytest.fixture
def openim_redis() -> Iterator[str]:
    """URL of a test Redis database of this test's own, for OpenIM's fixed key names."""
    with redis_database(redis_url()) as url:
        yield url


@pytest.fixture
def redis_cluster_cache(redis_cluster: RedisClusterProcesses) -> Iterator[Config]:
    """Cache config on this run's Redis Cluster, under a key prefix of its own."""
    with redis_prefix(redis_cluster.url, cluster=True) as prefix:
        yield {"backend": "redis-cluster", "url": redis_cluster.url, "key_prefix": prefix}


@pytest.fixture
def imbucket_emulated_server(backend_config: Config) -> bool:
    """Whether the row's server is the mongoeco emulator (overrides the plugin's False)."""
    return str(backend_config["store"]["backend"]).startswith("mongo") and emulated_mongo()
