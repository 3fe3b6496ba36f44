"""The Redis clients of the cache: the one place they are built, and the errors they raise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry

from imbucket.adapters import asyncio_bridge
from imbucket.adapters.timeouts import DEFAULT_CACHE_SECONDS

# A client, or for imbucket.aio an asyncio one behind asyncio_bridge.Awaiting (the same calls).
Client = redis.Redis | RedisCluster | asyncio_bridge.Awaiting
# Everything a Redis or cluster client raises for an unreachable or failing Redis.
REDIS_ERRORS = (RedisError, RedisClusterException, OSError)
# What a cache client retries (once, at once): a dropped connection; never a timeout.
_RETRIED = (RedisConnectionError,)
TOPOLOGY_ATTEMPTS = 3
_Client = TypeVar("_Client")


def client_options(
    timeout: float = DEFAULT_CACHE_SECONDS, connect_timeout: float | None = None
) -> dict[str, Any]:
    """Client settings for a cache: short timeouts, no waiting on a Redis that is down.

    timeout bounds the wait for each reply (``cache.socket_timeout_seconds``), connect_timeout
    the opening of a connection (``cache.connect_timeout_seconds``; timeout when None). The
    same options suit a cluster client.
    """
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout if connect_timeout is None else connect_timeout,
        # One immediate retry for a dropped connection; none for timeouts (slow = skip).
        "retry": Retry(NoBackoff(), 1, supported_errors=_RETRIED),
    }


def make_client(
    url: str, *, cluster: bool = False, asynchronous: bool = False, **options: Any
) -> Client:
    """The one place cache clients are built: a Redis, or a cluster client for ``cluster``.

    ``options`` are client keyword arguments on top of ``client_options()``; querystring options
    of url win over both. A cluster url names any node (``redis://host:port``); the client
    asks it for the topology at once, and raises ``RedisClusterException`` (or a ``RedisError``)
    when no node answers. On a cluster the retry covers redirections and topology refreshes:
    one immediate retry, so a dead master costs one quick failure, not a backoff.
    asynchronous: the redis.asyncio client behind ``asyncio_bridge.Awaiting``, whose every call
    must run in a greenlet (``imbucket.aio``).
    """
    settings = {**client_options(), **options}
    if asynchronous:
        return _asyncio_client(url, cluster, settings)
    if not cluster:
        return redis.Redis.from_url(url, **settings)
    # Reads go to masters only (the default): a replica may lag behind an invalidation.
    return _asking_for_topology(lambda: RedisCluster.from_url(url, **settings))


def _asking_for_topology(connect: Callable[[], _Client]) -> _Client:
    """connect(), tried up to TOPOLOGY_ATTEMPTS times while no node answers.

    The topology is asked for once, when a service starts: there a node slow to accept its
    first connection (a busy machine) must not fail the start, as it may skip one cache read.
    """
    for _ in range(TOPOLOGY_ATTEMPTS - 1):
        try:
            return connect()
        except REDIS_ERRORS:
            pass
    return connect()


def _asyncio_client(url: str, cluster: bool, settings: dict[str, Any]) -> asyncio_bridge.Awaiting:
    """A redis.asyncio client whose calls wait in the running greenlet (imbucket.aio)."""
    from redis.asyncio import Redis as AsyncRedis
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    from redis.asyncio.retry import Retry as AsyncRetry

    retry: Retry = settings["retry"]
    settings["retry"] = AsyncRetry(NoBackoff(), retry.get_retries(), supported_errors=_RETRIED)
    if not cluster:
        return asyncio_bridge.Awaiting(AsyncRedis.from_url(url, **settings))

    def connect() -> AsyncRedisCluster:
        client = AsyncRedisCluster.from_url(url, **settings)
        asyncio_bridge.wait_for(client.initialize())  # the topology now, as the sync client asks it
        return client

    return asyncio_bridge.Awaiting(_asking_for_topology(connect))


def is_cluster(client: Any) -> bool:
    """Whether client (or the asyncio client behind it) talks to a Redis Cluster."""
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    return isinstance(asyncio_bridge.unwrap(client), RedisCluster | AsyncRedisCluster)
