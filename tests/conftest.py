"""Session-wide test setup: servers started on demand are stopped at the end, and the
summary says on which MongoDB the Mongo tests ran."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.mongo import mongo_database, summary
from tests.redis_cluster import RedisClusterProcesses, start_cluster
from tests.servers import close_containers

_mongo_tests: set[str] = set()  # node ids of the tests that asked for a MongoDB database


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield from close_containers()


@pytest.fixture
def mongo_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A MongoDB database of this test's own (skips without a server)."""
    _mongo_tests.add(request.node.nodeid)
    with mongo_database() as url:
        yield url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line naming the MongoDB server and how many Mongo tests passed, failed, skipped."""
    if not _mongo_tests:
        return
    outcomes: Counter[str] = Counter()
    for outcome in ("passed", "failed", "error", "skipped"):
        reports = terminalreporter.stats.get(outcome, [])
        nodes = {report.nodeid for report in reports if report.nodeid in _mongo_tests}
        outcomes[outcome] = len(nodes)
    terminalreporter.write_sep("-", "MongoDB")
    terminalreporter.write_line(summary(dict(outcomes)))


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterProcesses]:
    """A Redis Cluster of this run's own (3 masters, 3 replicas), stopped at the end."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()
