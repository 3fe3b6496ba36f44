"""Bytes received from the stores, counted at each driver while a meter is running.

- SQL: the rows every ``Database.execute`` fetched (each value's text or byte length).
- MongoDB: the BSON size of every command reply, from a pymongo ``CommandListener``
  registered when this module is imported (pymongo hands global listeners only to clients
  created afterwards, and the contract fixtures open their clients later).
- Redis: every reply of ``Redis.execute_command`` and ``RedisCluster.execute_command`` (the
  lengths of the bulk strings in it; the read script's reply on a cluster).
- memory: what the in-process bucket repository hands back, as compact JSON.

Counts only, never times: for tests that pin how many bytes a read moves.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import bson
import redis
from pymongo import monitoring
from redis.cluster import RedisCluster

from adapters.codec import slot_to_doc
from adapters.memory import MemoryBucketRepository
from adapters.sql.engine import Database
from domain.model import Slot


class Meter:
    """Bytes received since the meter started, by driver."""

    def __init__(self) -> None:
        self.by_driver: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, driver: str, size: int) -> None:
        with self._lock:
            self.by_driver[driver] = self.by_driver.get(driver, 0) + size

    @property
    def total(self) -> int:
        """Every driver together."""
        return sum(self.by_driver.values())


_active: list[Meter] = []


class _MongoReplies(monitoring.CommandListener):
    def started(self, event: monitoring.CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        for meter in list(_active):
            meter.add("mongo", len(bson.encode(event.reply)))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


monitoring.register(_MongoReplies())


def size(value: Any) -> int:
    """Bytes of a reply value: strings and bytes by length, containers summed."""
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, list | tuple):
        return sum(size(item) for item in value)
    if isinstance(value, dict):
        return sum(size(k) + size(v) for k, v in value.items())
    if isinstance(value, Slot):
        return len(json.dumps(slot_to_doc(value), separators=(",", ":")))
    return len(str(value))


@contextmanager
def received() -> Iterator[Meter]:
    """Count the bytes every driver receives inside the block."""
    meter = Meter()
    execute, command = Database.execute, redis.Redis.execute_command
    cluster_command = RedisCluster.execute_command
    reads = {name: getattr(MemoryBucketRepository, name) for name in _MEMORY_READS}

    def sql(self: Database, *args: Any, **kwargs: Any) -> Any:
        outcome = execute(self, *args, **kwargs)
        meter.add("sql", size([list(row) for row in outcome.rows]))
        return outcome

    def redis_command(self: redis.Redis, *args: Any, **kwargs: Any) -> Any:
        reply = command(self, *args, **kwargs)
        meter.add("redis", size(reply))
        return reply

    def redis_cluster_command(self: RedisCluster, *args: Any, **kwargs: Any) -> Any:
        reply = cluster_command(self, *args, **kwargs)
        meter.add("redis", size(reply))
        return reply

    def memory(name: str) -> Any:
        def read(self: MemoryBucketRepository, *args: Any, **kwargs: Any) -> Any:
            found = reads[name](self, *args, **kwargs)
            meter.add("memory", size(found))
            return found

        return read

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(Database, "execute", sql))
        stack.enter_context(mock.patch.object(redis.Redis, "execute_command", redis_command))
        stack.enter_context(
            mock.patch.object(RedisCluster, "execute_command", redis_cluster_command)
        )
        for name in _MEMORY_READS:
            stack.enter_context(mock.patch.object(MemoryBucketRepository, name, memory(name)))
        _active.append(meter)
        try:
            yield meter
        finally:
            _active.remove(meter)


_MEMORY_READS = ("read", "read_viewed", "read_spilled")
