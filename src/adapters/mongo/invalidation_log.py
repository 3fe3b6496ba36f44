"""MongoInvalidationLog: undelivered cache invalidations as documents beside the store's."""

from __future__ import annotations

from collections.abc import Sequence

from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.domain.invalidation import Invalidation, decoded
from imbucket.ports.invalidation_log import LoggedInvalidation


def log_collection(collection: str) -> str:
    """The log collection of a data collection's store (``msg_cache_log``)."""
    return f"{collection}_cache_log"


class MongoInvalidationLog:
    """InvalidationLog as documents ``{_id: ObjectId, c, i, at}``, read in _id order.

    ``c`` is the conversation id, ``i`` the encoded invalidation, ``at`` the writer's time.
    One command a call.
    """

    def __init__(self, connection: MongoConnection, collection: str) -> None:
        self.connection = connection
        self.name = log_collection(collection)

    def append(self, invalidation: Invalidation, written_at: float) -> None:
        """One insert."""
        document = {"c": invalidation.conversation_id, "i": invalidation.encode(), "at": written_at}
        with translated("log a cache invalidation"):
            self.connection.collection(self.name).insert_one(document)

    def read(self, limit: int) -> list[LoggedInvalidation]:
        """One find of the oldest entries."""
        with translated("read the cache invalidation log"):
            found = list(self.connection.collection(self.name).find({}).sort("_id", 1).limit(limit))
        return [
            LoggedInvalidation(doc["_id"], float(doc["at"]), decoded(str(doc["c"]), str(doc["i"])))
            for doc in found
        ]

    def remove(self, keys: Sequence[object]) -> None:
        """One delete by _id."""
        if keys:
            with translated("remove delivered cache invalidations"):
                self.connection.collection(self.name).delete_many({"_id": {"$in": list(keys)}})
