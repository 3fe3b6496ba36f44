"""One factory per store backend. Drivers are imported inside the factories, never at import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.bucket import BucketMessageStore
from adapters.memory import MemoryBucketRepository, MemorySeqStore
from domain.errors import ConfigError
from domain.layout import BucketLayout
from ports.message_store import MessageStore
from ports.seq_store import SeqStore


@dataclass(frozen=True, slots=True)
class Backend:
    """A store and the seq store that shares its engine."""

    store: MessageStore
    seqs: SeqStore


def memory(url: str, layout: BucketLayout) -> Backend:
    """Buckets and counters in this process's memory."""
    return Backend(BucketMessageStore(MemoryBucketRepository(layout)), MemorySeqStore())


def sql_row(url: str, layout: BucketLayout) -> Backend:
    """One row per message on SQLite, PostgreSQL or MariaDB (``sqlite://`` when url is empty)."""
    from adapters.sql import open_row

    return Backend(*open_row(url, layout))


def sql_bucket(url: str, layout: BucketLayout) -> Backend:
    """JSON buckets on SQLite, PostgreSQL or MariaDB (``sqlite://`` when url is empty)."""
    from adapters.sql import open_bucket

    return Backend(*open_bucket(url, layout))


def _not_yet(name: str) -> Callable[[str, BucketLayout], Backend]:
    def factory(url: str, layout: BucketLayout) -> Backend:
        raise ConfigError(f"store backend {name!r} is not available in this build yet")

    return factory


STORE_FACTORIES: dict[str, Callable[[str, BucketLayout], Backend]] = {
    "memory": memory,
    "sql-row": sql_row,
    "sql-bucket": sql_bucket,
    "mongo-bucket": _not_yet("mongo-bucket"),
    "mongo-row": _not_yet("mongo-row"),
}


def store_of(backend: Backend) -> MessageStore:
    """The backend's MessageStore, uncached."""
    return backend.store


def seqs_of(backend: Backend) -> SeqStore:
    """The backend's SeqStore."""
    return backend.seqs


def redis_cached_store(
    backend: Backend, url: str, ttl_seconds: int, key_prefix: str
) -> MessageStore:
    """The backend's store behind the Redis read cache."""
    raise ConfigError("cache backend 'redis' is not available in this build yet")
