"""Session-wide test setup: containers started on demand are stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mongo import mongo_database
from tests.redis_cluster import RedisClusterProcesses, start_cluster
from tests.servers import close_containers


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield from close_containers()


@pytest.fixture
def mongo_url() -> Iterator[str]:
    """A MongoDB database of this test's own (skips without a server)."""
    with mongo_database() as url:
        yield url


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterProcesses]:
    """A Redis Cluster of this run's own (3 masters, 3 replicas), stopped at the end."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()
