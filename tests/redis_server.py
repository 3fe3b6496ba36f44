"""The test Redis: its URL (env, testcontainers, or skip) and per-test key prefixes.

Other test runs share the server: each test gets its own key prefix and deletes exactly the
keys under it afterwards (SCAN + DEL, never FLUSHDB).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import redis
from redis.cluster import RedisCluster

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


def delete_prefix(url: str, prefix: str, cluster: bool = False) -> int:
    """Delete every key under prefix (on every master of a cluster); returns how many."""
    client = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        return len(keys)
    finally:
        client.close()


@contextmanager
def redis_prefix(url: str, cluster: bool = False) -> Iterator[str]:
    """A fresh key prefix whose keys are deleted on exit."""
    prefix = f"imbucket-test-{uuid.uuid4().hex}"
    try:
        yield prefix
    finally:
        delete_prefix(url, prefix, cluster)
