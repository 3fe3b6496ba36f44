"""Commands on ``meta``: what a store's collection records on first open (layout, cache)."""

from __future__ import annotations

from imbucket.adapters.mongo.commands.shapes import FindAndUpdate


def record_layout(collection: str, bucket_size: int) -> FindAndUpdate:
    """Record the bucket size of collection on first open; return what is recorded."""
    return FindAndUpdate(
        {"_id": collection},
        {"$setOnInsert": {"bucket_size": bucket_size}},
        {"_id": 0, "bucket_size": 1},
    )


def record_cache_binding(collection: str, binding: str) -> FindAndUpdate:
    """Record which cache fronts collection's store on first open; return what is recorded."""
    return FindAndUpdate(
        {"_id": f"{collection}:cache"},
        {"$setOnInsert": {"binding": binding}},
        {"_id": 0, "binding": 1},
    )


def replace_cache_binding(collection: str, expected: str, binding: str) -> FindAndUpdate:
    """Set the cache binding of collection's store if it is expected (no upsert)."""
    return FindAndUpdate(
        {"_id": f"{collection}:cache", "binding": expected},
        {"$set": {"binding": binding}},
        {"_id": 0, "binding": 1},
        upsert=False,
    )
