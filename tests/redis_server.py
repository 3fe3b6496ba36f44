"""The test Redis: its URL (env, testcontainers, or skip) and per-test key prefixes.

Other test runs share the server: each test gets its own key prefix and deletes exactly the
keys under it afterwards (SCAN + UNLINK), through ``bench.instrument.scratch`` as the
benchmark does. A test whose keys are fixed names (OpenIM's) gets a whole database index
instead, leased so that no concurrent test or run holds it, and emptied before and after.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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


# Database indexes leased to tests whose keys have fixed names; below them, the server's
# other users (the key-prefixed tests use 0, test_binding 1).
LEASED_DATABASES = range(8, 16)
LEASE = "imbucket-test-redis-database:"  # + index, a key in the URL's own database
LEASE_SECONDS = 900
LEASE_WAIT_SECONDS = 0.2


@contextmanager
def redis_database(url: str) -> Iterator[str]:
    """url on a database index of this test's own, empty, emptied again on exit.

    The index is leased through a ``SET NX`` key in url's database, so concurrent tests and
    runs sharing the server never hold the same one; this waits while all are leased.
    """
    import redis

    owner = redis.Redis.from_url(url)
    token = uuid.uuid4().hex
    try:
        index = _lease(owner, token)
        parts = urlsplit(url)
        leased = urlunsplit(parts._replace(path=f"/{index}"))
        scratch = redis.Redis.from_url(leased)
        try:
            scratch.flushdb()
            yield leased
        finally:
            scratch.flushdb()
            scratch.close()
            if owner.get(LEASE + str(index)) == token.encode():
                owner.delete(LEASE + str(index))
    finally:
        owner.close()


def _lease(owner: Any, token: str) -> int:
    """The first free index of LEASED_DATABASES, now leased to token."""
    while True:
        for index in LEASED_DATABASES:
            if owner.set(LEASE + str(index), token, nx=True, ex=LEASE_SECONDS):
                return index
        time.sleep(LEASE_WAIT_SECONDS)
