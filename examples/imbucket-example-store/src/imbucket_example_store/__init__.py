"""An imbucket backend outside imbucket: buckets as JSON strings in a key-value dict.

The package registers ``open_backend`` under the ``imbucket.backends`` entry point
``example-dict``; imbucket imports it only when a configuration selects that name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

from imbucket.plugin_api import (
    Backend,
    BucketLayout,
    BucketMessageStore,
    BucketRepository,
    MemoryCacheBinding,
    MemorySeqStore,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    Spilled,
    StoreStats,
    TagBudget,
    Timeouts,
    Viewed,
    conversation_of,
    slot_from_doc,
    slot_to_doc,
    takes_revoke,
    viewed_deleters,
)


def open_backend(url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts) -> Backend:
    """The entry point: imbucket calls it with store.url, the layout, budget and timeouts."""
    store = BucketMessageStore(DictBucketRepository(layout), budget)
    # Kept with the store (here: in memory), so the store can be put behind a cache.
    return Backend(store, MemorySeqStore(), binding=MemoryCacheBinding())


class DictBucketRepository(BucketRepository):
    """A BucketRepository over a key-value map: doc_id -> the bucket as a JSON string.

    One lock per call stands for the engine's single-key atomic write (a lightweight
    transaction on ScyllaDB): create-if-absent and compare-then-write are atomic.
    """

    def __init__(self, layout: BucketLayout) -> None:
        self.layout = layout
        self._kv: dict[str, str] = {}
        self._spilled: dict[tuple[str, int], set[str]] = {}
        self._lock = threading.Lock()

    def _load(self, doc_id: str) -> list[Slot] | None:
        raw = self._kv.get(doc_id)
        if raw is None:
            return None
        conversation = conversation_of(doc_id)
        return [slot_from_doc(conversation, doc) for doc in json.loads(raw)]

    def _store(self, doc_id: str, slots: Sequence[Slot]) -> None:
        # Compact UTF-8 JSON: store.max_bucket_bytes bounds buckets in this encoding.
        docs = [slot_to_doc(slot) for slot in slots]
        self._kv[doc_id] = json.dumps(docs, ensure_ascii=False, separators=(",", ":"))

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Fill free slots of an existing bucket, all or nothing."""
        with self._lock:
            slots = self._load(doc_id)
            if slots is None or not all(_free(slots[i]) for i in messages):
                return False
            for index, message in messages.items():
                slots[index] = replace(slots[index], message=message)
            self._store(doc_id, slots)
            return True

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Insert the bucket unless doc_id exists."""
        with self._lock:
            if doc_id in self._kv:
                return False
            self._store(doc_id, [slots.get(i, Slot()) for i in range(self.layout.size)])
            return True

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Requested slots of the existing buckets."""
        with self._lock:
            found = {doc_id: self._load(doc_id) for doc_id in wanted}
        return {
            doc_id: {i: slots[i] for i in wanted[doc_id]}
            for doc_id, slots in found.items()
            if slots is not None
        }

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """Requested slots as viewer reads them, with their inline deleter counts.

        A key-value store ships the whole bucket anyway; an engine that can evaluate the
        membership itself (a CQL collection ``CONTAINS``) should, so no list travels.
        """
        return {
            doc_id: {
                index: (
                    replace(
                        slot,
                        deleted_by=viewed_deleters(
                            viewer, viewer in slot.deleted_by, bool(slot.deleted_by)
                        ),
                    ),
                    len(slot.deleted_by),
                )
                for index, slot in slots.items()
            }
            for doc_id, slots in self.read(wanted).items()
        }

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Revoke an unrevoked, unpurged slot."""
        with self._lock:
            slots = self._load(doc_id)
            if slots is None or not takes_revoke(slots[slot]):
                return False
            slots[slot] = replace(slots[slot], revoke=revoke)
            self._store(doc_id, slots)
            return True

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """Apply tag changes within budget, checked in the same atomic step."""
        with self._lock:
            slots = self._load(doc_id)
            if slots is None or (budget and not budget.conditions(patches).holds(slots)):
                return False
            for index, change in patches.items():
                slots[index] = slots[index].patched(change)
            self._store(doc_id, slots)
            return True

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """Set-add deleters to the side table; how many were new."""
        with self._lock:
            before = sum(map(len, self._spilled.values()))
            for doc_id, index, user_id in entries:
                self._spilled.setdefault((doc_id, index), set()).add(user_id)
            return sum(map(len, self._spilled.values())) - before

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """Side-table deleters of the given slots (viewer's own entry only, when given)."""
        found: dict[str, dict[int, set[str]]] = {}
        with self._lock:
            for doc_id, indexes in wanted.items():
                for index in indexes:
                    users = self._spilled.get((doc_id, index), set())
                    if viewer is not None:
                        users = users & {viewer}
                    if users:
                        found.setdefault(doc_id, {})[index] = set(users)
        return found

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """Forget the side-table deleters of the given slots."""
        with self._lock:
            for doc_id, indexes in wanted.items():
                for index in indexes:
                    self._spilled.pop((doc_id, index), None)

    def scan_buckets(self, after: str | None, limit: int) -> list[tuple[str, list[Slot]]]:
        """Whole buckets in doc_id order after ``after``."""
        with self._lock:
            ids = sorted(d for d in self._kv if after is None or d > after)[:limit]
            return [(doc_id, self._load(doc_id) or []) for doc_id in ids]

    def bucket_bytes(self, doc_id: str) -> int | None:
        """The stored JSON string's size in UTF-8."""
        with self._lock:
            raw = self._kv.get(doc_id)
        return None if raw is None else len(raw.encode())

    def stats(self) -> StoreStats:
        """Messages, buckets, stored bytes; the key is the index."""
        with self._lock:
            buckets = {doc_id: self._load(doc_id) or [] for doc_id in self._kv}
            data = sum(len(raw.encode()) for raw in self._kv.values())
        messages = sum(slot.message is not None for slots in buckets.values() for slot in slots)
        return StoreStats(messages, len(buckets), data, sum(len(d.encode()) for d in buckets))

    def close(self) -> None:
        """Nothing to release."""


def _free(slot: Slot) -> bool:
    return slot.message is None and not slot.purged
