"""Which raw-driver arm the benchmark pits against a store (``raw_pull_latest``).

One hand-written query per pull on the store's own tables or collections: sql-row and
sql-bucket (``raw_sql``), mongo-row and mongo-bucket (``raw_mongo``). Stores without one
(memory, third-party plugins) get None.
"""

from __future__ import annotations

from typing import Any

from imbucket.domain.layout import BucketLayout
from imbucket.ports.message_store import MessageStore


def raw_arm(store: MessageStore) -> Any | None:
    """The raw arm reading what store reads, or None when there is none for it."""
    from imbucket.adapters.sql import SqlBucketStore, SqlRowStore

    if isinstance(store, SqlRowStore):
        from imbucket.bench.instrument.raw_sql import RawRowLatest

        return RawRowLatest(store.engine, store.schema)
    if isinstance(store, SqlBucketStore):
        from imbucket.bench.instrument.raw_sql import RawBucketLatest

        return RawBucketLatest(store.engine, store.schema, store.layout)
    return _mongo_arm(store)


def _mongo_arm(store: MessageStore) -> Any | None:
    """The aggregate arm of a Mongo store (mongo-row, mongo-bucket), else None.

    It reaches the store's repository for the client: the Mongo stores declare no accessor
    for it, since only this arm, which is driver-specific by nature, needs one.
    """
    repository = getattr(store, "repository", None)
    layout: BucketLayout | None = getattr(store, "layout", None)
    if layout is None:
        return None
    try:
        from imbucket.adapters.mongo.bucket import MongoBucketRepository
        from imbucket.adapters.mongo.row import MongoRowRepository
    except ImportError:  # pymongo is an optional extra
        return None
    from imbucket.bench.instrument.raw_mongo import RawMongoBucketLatest, RawMongoRowLatest

    if isinstance(repository, MongoRowRepository):
        return RawMongoRowLatest(repository.connection, layout)
    if isinstance(repository, MongoBucketRepository):
        return RawMongoBucketLatest(repository.connection, layout)
    return None
