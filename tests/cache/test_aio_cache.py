"""The Redis cache under imbucket.aio: the sync cache's code over a redis.asyncio client."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis as AsyncRedis

from imbucket import Draft
from imbucket.adapters.asyncio_bridge import unwrap
from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.adapters.relayed_cache import RelayedCache
from imbucket.aio import open_service as open_async


def test_the_async_service_caches_through_a_redis_asyncio_client(redis_cache: Any) -> None:
    config = {"store": {"backend": "memory"}, "cache": redis_cache}

    async def scenario() -> tuple[Any, list[int], list[int]]:
        async with open_async(config) as service:
            relayed = service.service.store.cache  # type: ignore[attr-defined]
            assert type(relayed) is RelayedCache
            cache = relayed.cache
            assert type(cache) is RedisMessageCache
            hi = Draft(send_id="alice", content="hi", client_msg_id="c-1", recv_id="bob")
            await service.send("si_alice_bob", [hi])
            first = [entry.seq for entry in await service.pull_latest("si_alice_bob", "bob")]
            again = [entry.seq for entry in await service.pull_range("si_alice_bob", "bob", 1, 1)]
            return unwrap(cache.client), first, again

    client, first, again = asyncio.run(scenario())
    assert isinstance(client, AsyncRedis)
    assert first == again == [1]
