"""In-memory engines: a BucketRepository and a SeqStore. Thread-safe; the reference backend."""

from __future__ import annotations

import json
import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from adapters.codec import slot_to_doc
from domain.layout import BucketLayout
from domain.model import EMPTY_SLOT, Message, Revoke, Slot, SlotPatch, StoreStats, Watermarks

_K = TypeVar("_K", bound=Hashable)


class MemoryBucketRepository:
    """Buckets in a dict, each a list of exactly ``layout.size`` slots.

    Each method holds one lock for its whole duration, like a single-document write on a
    real engine, so two writers racing to create one bucket see the duplicate outcome.
    """

    def __init__(self, layout: BucketLayout | None = None) -> None:
        self.layout = layout or BucketLayout()
        self._buckets: dict[str, list[Slot]] = {}
        self._lock = threading.Lock()

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Fill empty slots, all or nothing."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None:
                return False
            if any(bucket[i].message is not None or bucket[i].purged for i in messages):
                return False
            for index, message in messages.items():
                old = bucket[index]
                bucket[index] = Slot(
                    message, old.revoke, old.deleted_by, old.is_read, False, old.read_by
                )
            return True

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Insert a whole bucket unless doc_id exists."""
        with self._lock:
            if doc_id in self._buckets:
                return False
            bucket = [EMPTY_SLOT] * self.layout.size
            for index, slot in slots.items():
                bucket[index] = slot
            self._buckets[doc_id] = bucket
            return True

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Requested slots of existing buckets."""
        with self._lock:
            return {
                doc_id: {index: self._buckets[doc_id][index] for index in indexes}
                for doc_id, indexes in wanted.items()
                if doc_id in self._buckets
            }

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Set revoke on an unrevoked, unpurged slot of an existing bucket."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None or bucket[slot].revoke is not None or bucket[slot].purged:
                return False
            old = bucket[slot]
            bucket[slot] = Slot(
                old.message, revoke, old.deleted_by, old.is_read, False, old.read_by
            )
            return True

    def patch(self, doc_id: str, patches: Mapping[int, SlotPatch]) -> bool:
        """Apply tag changes to an existing bucket."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None:
                return False
            for index, patch in patches.items():
                bucket[index] = bucket[index].patched(patch)
            return True

    def stats(self) -> StoreStats:
        """Sizes as the JSON a document engine would store; index = one doc_id key per bucket."""
        with self._lock:
            buckets = {doc_id: list(slots) for doc_id, slots in self._buckets.items()}
        messages = sum(slot.message is not None for slots in buckets.values() for slot in slots)
        data = sum(
            len(json.dumps({"doc_id": doc_id, "msgs": [slot_to_doc(s) for s in slots]}))
            for doc_id, slots in buckets.items()
        )
        index = sum(len(doc_id.encode()) + 8 for doc_id in buckets)
        return StoreStats(messages, len(buckets), data, index)

    def close(self) -> None:
        """Nothing to release."""


class MemorySeqStore:
    """Seq counters and watermarks in dicts, guarded by one lock."""

    def __init__(self) -> None:
        self._max: dict[str, int] = {}
        self._min: dict[str, int] = {}
        self._user_min: dict[tuple[str, str], int] = {}
        self._read: dict[tuple[str, str], int] = {}
        self._sends: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def allocate(self, conversation_id: str, n: int) -> int:
        """Reserve n consecutive seqs."""
        with self._lock:
            first = self._max.get(conversation_id, 0) + 1
            self._max[conversation_id] = first + n - 1
            return first

    def max_seq(self, conversation_id: str) -> int:
        """Highest allocated seq."""
        with self._lock:
            return self._max.get(conversation_id, 0)

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise max_seq."""
        return self._raise(self._max, conversation_id, seq)

    def min_seq(self, conversation_id: str) -> int:
        """Conversation floor."""
        with self._lock:
            return self._min.get(conversation_id, 0)

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Raise the conversation floor."""
        return self._raise(self._min, conversation_id, seq)

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """User floor."""
        with self._lock:
            return self._user_min.get((conversation_id, user_id), 0)

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user floor."""
        return self._raise(self._user_min, (conversation_id, user_id), seq)

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """User read seq."""
        with self._lock:
            return self._read.get((conversation_id, user_id), 0)

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user read seq."""
        return self._raise(self._read, (conversation_id, user_id), seq)

    def sent_seqs(self, conversation_id: str, client_msg_ids: Sequence[str]) -> dict[str, int]:
        """Recorded seqs of the client_msg_ids that have one."""
        with self._lock:
            found = ((cid, self._sends.get((conversation_id, cid))) for cid in client_msg_ids)
            return {cid: seq for cid, seq in found if seq is not None}

    def claim_sends(self, conversation_id: str, claims: Mapping[str, int]) -> dict[str, int]:
        """Record the claims of client_msg_ids without a seq; return every recorded seq."""
        with self._lock:
            return {
                cid: self._sends.setdefault((conversation_id, cid), seq)
                for cid, seq in claims.items()
            }

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """All bounds of one viewer at once."""
        with self._lock:
            return Watermarks(
                self._max.get(conversation_id, 0),
                self._min.get(conversation_id, 0),
                self._user_min.get((conversation_id, user_id), 0),
            )

    def close(self) -> None:
        """Nothing to release."""

    def _raise(self, table: dict[_K, int], key: _K, seq: int) -> int:
        with self._lock:
            value = max(table.get(key, 0), seq)
            table[key] = value
            return value
