"""What every repository over OpenIM's bucket collection ``msg`` does the same way.

``mongo-bucket`` (imbucket's own slots) and ``openim-mongo`` (a database OpenIM wrote) keep
their buckets in the same collection shape; they differ in how a slot document decodes, so
each names its decoder and inherits the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from imbucket.adapters.codec import conversation_of
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.commands import Doc
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.mongo.replies import bucket_bytes, duplicate_positions, store_stats
from imbucket.domain.model import Slot, SlotPatch, StoreStats
from imbucket.domain.tags import patch_sparing_purged


class MsgCollection:
    """Scanning, sizing and closing a bucket collection; subclasses set the slot decoder."""

    _connection: MongoConnection
    _buckets: Collection[Doc]  # ``msg``
    # A slot document of conversation_id as a Slot.
    decode_slot: Callable[[str, Any], Slot]

    def scan_buckets(self, after: str | None, limit: int) -> list[tuple[str, list[Slot]]]:
        """One find over ``msg`` in doc_id order (its unique index)."""
        cursor = None if after is None else json.dumps([after])
        found, _ = self._connection.scan(commands.BUCKETS, cursor, limit)
        decode = type(self).decode_slot
        return [
            (doc["doc_id"], [decode(conversation_of(doc["doc_id"]), s) for s in doc["msgs"]])
            for doc in found
        ]

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """The wanted slots of each bucket found (a subclass's own query)."""
        raise NotImplementedError

    def _patch_sparing_purged(
        self,
        doc_id: str,
        patches: Mapping[int, SlotPatch],
        update: Callable[[Mapping[int, SlotPatch]], bool],
    ) -> bool:
        """Patch one bucket by update, purged target slots dropped (``patch_sparing_purged``).

        A refused update reads the target slots back, or looks the bucket up when no slot is
        left, to tell purged slots from a missing bucket or a refused budget.
        """
        return patch_sparing_purged(
            doc_id,
            patches,
            update,
            lambda slots: self.read({doc_id: slots}).get(doc_id),
            lambda: self._exists(doc_id),
        )

    def _insert_bucket(self, document: Doc) -> bool:
        """insert_one of a whole bucket; False when its doc_id exists (another writer won)."""
        with translated("create a bucket"):
            try:
                self._buckets.insert_one(document)
            except DuplicateKeyError:
                return False
        return True

    def _insert_buckets(self, doc_ids: list[str], documents: list[Doc]) -> set[str]:
        """Unordered insert_many of the buckets doc_ids name; the doc_ids it created.

        A duplicate doc_id means that bucket existed already.
        """
        with translated("create buckets"):
            try:
                self._buckets.insert_many(documents, ordered=False)
            except BulkWriteError as error:
                lost = set(duplicate_positions(error.details))
                return {doc_id for n, doc_id in enumerate(doc_ids) if n not in lost}
        return set(doc_ids)

    def _exists(self, doc_id: str) -> bool:
        with translated("look up a bucket"):
            return self._buckets.count_documents(commands.bucket_exists(doc_id), limit=1) > 0

    def bucket_bytes(self, doc_id: str) -> int | None:
        """``$bsonSize`` of the bucket document."""
        with translated("measure a bucket"):
            return bucket_bytes(self._buckets.aggregate(commands.bucket_size(doc_id)))

    def stats(self) -> StoreStats:
        """``$collStats`` of ``msg`` plus a count of stored messages (a full scan).

        Spilled deleters count as data, not as documents; user documents as neither.
        """
        with translated("read collection stats"):
            storage = list(self._buckets.aggregate(commands.STORAGE_STATS))
            counted = list(self._buckets.aggregate(commands.COUNT_BUCKET_MESSAGES))
        return store_stats(storage, counted)

    @property
    def connection(self) -> MongoConnection:
        """The client and database (for instrumentation such as the benchmark's raw arm)."""
        return self._connection

    def close(self) -> None:
        """Close the client."""
        self._connection.close()
