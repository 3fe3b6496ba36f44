"""A writer cut off from the Redis cache while readers pull through it, and a broken cache.

Guarantee: every write of a writer that cannot reach the cache becomes visible to every
cached reader within the cache's staleness bound, whether or not that writer ever reaches
Redis again; the history of sends, ingests, tag writes, clears, purges and pulls is one the
reference model gives. And the checker can fail: with invalidation switched off in the
test's process, the same run must show anomalies.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.testing.histories import Recorder, run_threads
from tests.histories.rig import Config, closed_port, config, finish, run, with_cache_url, workload
from tests.proxy import TcpProxy
from tests.redis_server import redis_prefix, redis_url
from tests.sql_servers import postgres_schema, postgres_server

pytestmark = pytest.mark.histories
CUT_AFTER = 60  # calls, of all clients, before the writer's Redis connection is cut


@pytest.fixture
def cached() -> Iterator[Config]:
    """sql-bucket on a PostgreSQL schema of the test's own, with the Redis cache."""
    url = redis_url()
    with postgres_schema(postgres_server()) as store_url, redis_prefix(url) as prefix:
        store = {"backend": "sql-bucket", "url": store_url}
        yield config(store, {"backend": "redis", "url": url, "key_prefix": prefix})


@pytest.fixture
def cached_sqlite(tmp_path: object) -> Iterator[Config]:
    """sql-bucket on a SQLite file, with the Redis cache: the case as first measured."""
    url = redis_url()
    with redis_prefix(url) as prefix:
        store = {"backend": "sql-bucket", "url": f"sqlite:///{tmp_path}/history.db"}
        yield config(store, {"backend": "redis", "url": url, "key_prefix": prefix})


def test_a_writer_whose_cache_port_is_mistyped(cached_sqlite: Config) -> None:
    work = workload(seed=1)
    with run() as history:
        readers = [history.client(f"reader-{i}", cached_sqlite, writer=False) for i in (1, 2)]
        mistyped = with_cache_url(cached_sqlite, f"redis://127.0.0.1:{closed_port()}/0")
        writers = [
            history.client("writer-mistyped", mistyped, writer=True),
            history.client("writer", cached_sqlite, writer=True),
        ]
        run_threads([*writers, *readers], work, history.recorder)
        finish(history, work, cached_sqlite, "writer-mistyped's cache URL names a closed port")


def test_a_writer_whose_redis_connection_is_cut_after_open(cached: Config) -> None:
    work = workload(seed=2)
    with run() as history:
        proxy = TcpProxy(cached["cache"]["url"])
        history.stack.callback(proxy.close)
        readers = [history.client(f"reader-{i}", cached, writer=False) for i in (1, 2)]
        writers = [
            history.client("writer-cut", with_cache_url(cached, proxy.url), writer=True),
            history.client("writer", cached, writer=True),
        ]

        def cut(recorder: Recorder = history.recorder) -> None:
            assert recorder.wait_for(CUT_AFTER, timeout=30)
            proxy.cut()

        run_threads([*writers, *readers], work, history.recorder, cut)
        finish(history, work, cached, f"writer-cut's Redis connection cut after {CUT_AFTER} calls")


def test_the_checker_reports_a_cache_whose_invalidation_is_switched_off(
    cached: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = workload(seed=3, seconds=4.0)
    with run() as history:
        readers = [history.client(f"reader-{i}", cached, writer=False) for i in (1, 2)]
        writer = history.client("writer", cached, writer=True)
        # Redis says it took each invalidation, and drops it: nothing goes to the store's log.
        monkeypatch.setattr(RedisMessageCache, "invalidate", lambda *args, **kwargs: True)
        monkeypatch.setattr(RedisMessageCache, "invalidate_marks", lambda *args, **kwargs: True)
        run_threads([writer, *readers], work, history.recorder)
        finish(history, work, cached, "no cache invalidation (switched off)", expect_anomalies=True)
