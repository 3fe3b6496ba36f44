"""The test Redis: its URL (env, testcontainers, or skip) and per-test key prefixes.

Other test runs share the server: each test gets its own key prefix and deletes exactly the
keys under it afterwards (SCAN + UNLINK, never FLUSHDB), through ``bench.instrument.scratch``
as the benchmark does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from imbucket.bench.instrument.scratch import scratch_redis
from tests.servers import server_url


def _start_redis(stack: ExitStack) -> str:
    try:
        from testcontainers.community.redis import RedisContainer
    except ImportError:  # testcontainers < 4.13
        from testcontainers.redis import RedisContainer

    container = stack.enter_context(RedisContainer())
    return f"redis://{container.get_container_host_ip()}:{container.get_exposed_port(6379)}/0"


def redis_url() -> str:
    """URL of the test Redis, or pytest.skip with the reason."""
    return server_url("redis", _start_redis)


@contextmanager
def redis_prefix(url: str, cluster: bool = False) -> Iterator[str]:
    """A fresh key prefix whose keys are deleted on exit."""
    with scratch_redis(url, f"imbucket-test-{uuid.uuid4().hex}", cluster) as prefix:
        yield prefix
