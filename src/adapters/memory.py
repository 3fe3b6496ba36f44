"""In-memory engines: a BucketRepository and a SeqStore. Thread-safe; the reference backend."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TypeVar

from imbucket.adapters.codec import slot_to_doc
from imbucket.domain.budget import TagBudget
from imbucket.domain.invalidation import Invalidation
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    Message,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
    TableStats,
    Watermarks,
    viewed_deleters,
)
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs
from imbucket.domain.tags import takes_revoke
from imbucket.ports.bucket_repository import Spilled, Viewed
from imbucket.ports.invalidation_log import LoggedInvalidation

_K = TypeVar("_K", bound=Hashable)
_R = TypeVar("_R")


class MemoryBucketRepository:
    """Buckets in a dict, each a list of exactly ``layout.size`` slots.

    Each method holds one lock for its whole duration, like a single-document write on a
    real engine, so two writers racing to create one bucket see the duplicate outcome
    (reentrant: ``patch_many`` holds it across its patches and spills).
    """

    def __init__(self, layout: BucketLayout | None = None) -> None:
        self.layout = layout or BucketLayout()
        self._buckets: dict[str, list[Slot]] = {}
        self._spilled: dict[tuple[str, int], set[str]] = {}
        self._lock = threading.RLock()

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Fill empty slots, all or nothing."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None:
                return False
            if any(bucket[i].message is not None or bucket[i].purged for i in messages):
                return False
            for index, message in messages.items():
                bucket[index] = replace(bucket[index], message=message)
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

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """Insert each whole bucket unless its doc_id exists."""
        return {doc_id for doc_id, slots in buckets.items() if self.create_bucket(doc_id, slots)}

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Requested slots of existing buckets."""
        return self._slots(wanted)

    def _slots(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        with self._lock:
            return {
                doc_id: {index: self._buckets[doc_id][index] for index in indexes}
                for doc_id, indexes in wanted.items()
                if doc_id in self._buckets
            }

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """Requested slots of existing buckets as viewer reads them (a set lookup)."""
        return {
            doc_id: {index: _viewed(slot, viewer) for index, slot in slots.items()}
            for doc_id, slots in self._slots(wanted).items()
        }

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Set revoke on an unrevoked, unpurged slot of an existing bucket."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None or not takes_revoke(bucket[slot]):
                return False
            bucket[slot] = replace(bucket[slot], revoke=revoke)
            return True

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """Apply tag changes to an existing bucket, within budget when one is given."""
        with self._lock:
            bucket = self._buckets.get(doc_id)
            if bucket is None or (
                budget is not None and not budget.conditions(patches).holds(bucket)
            ):
                return False
            for index, patch in patches.items():
                bucket[index] = bucket[index].patched(patch)
            return True

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """``patch`` of several buckets at once (one call: one round trip of a real engine).

        The spills of the buckets written go to the side sets under the same lock.
        """
        with self._lock:
            written = {d for d, slots in patches.items() if self.patch(d, slots, budget)}
            self.add_spilled([entry for entry in spills if entry[0] in written])
        return written

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """Add deleters to the side sets; how many were new."""
        added = 0
        with self._lock:
            for doc_id, index, user_id in entries:
                users = self._spilled.setdefault((doc_id, index), set())
                added += user_id not in users
                users.add(user_id)
        return added

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """Side-table deleters of the given slots (viewer's entry only when given)."""
        found: dict[str, dict[int, set[str]]] = {}
        with self._lock:
            for doc_id, indexes in wanted.items():
                for index in indexes:
                    users = self._spilled.get((doc_id, index))
                    if users and viewer is not None:
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
            ids = sorted(d for d in self._buckets if after is None or d > after)[:limit]
            return [(doc_id, list(self._buckets[doc_id])) for doc_id in ids]

    def bucket_bytes(self, doc_id: str) -> int | None:
        """Size of the bucket as compact UTF-8 JSON (what the SQL engines store)."""
        with self._lock:
            slots = self._buckets.get(doc_id)
            slots = None if slots is None else list(slots)
        return None if slots is None else _json_bytes(doc_id, slots)

    def stats(self) -> StoreStats:
        """Sizes as compact JSON, spilled deleters included; index = one key per bucket/entry."""
        with self._lock:
            buckets = {doc_id: list(slots) for doc_id, slots in self._buckets.items()}
            spilled = [
                (doc_id, user) for (doc_id, _), users in self._spilled.items() for user in users
            ]
        messages = sum(slot.message is not None for slots in buckets.values() for slot in slots)
        data = sum(_json_bytes(doc_id, slots) for doc_id, slots in buckets.items())
        # A side-table entry as a row: doc_id, slot index, user_id.
        data += sum(len(doc_id.encode()) + len(user.encode()) + 8 for doc_id, user in spilled)
        index = sum(len(doc_id.encode()) + 8 for doc_id in buckets)
        return StoreStats(messages, len(buckets), data, index)

    def close(self) -> None:
        """Nothing to release."""


def _json_bytes(doc_id: str, slots: Sequence[Slot]) -> int:
    document = {"doc_id": doc_id, "msgs": [slot_to_doc(slot) for slot in slots]}
    return len(json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode())


class MemorySeqStore:
    """Seq counters and watermarks in dicts, guarded by one lock."""

    def __init__(self) -> None:
        self._max: dict[str, int] = {}
        self._min: dict[str, int] = {}
        self._user_min: dict[tuple[str, str], int] = {}
        self._read: dict[tuple[str, str], int] = {}
        # (conversation_id, client_msg_id) -> (seq, claimed at, epoch ms), in claim-time order
        self._sends: dict[tuple[str, str], tuple[int, int]] = {}
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

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """Recorded seqs of the client_msg_ids that have one, recorded at since or later."""
        with self._lock:
            found = ((cid, self._sends.get((conversation_id, cid))) for cid in client_msg_ids)
            return {
                cid: claim[0] for cid, claim in found if claim is not None and claim[1] >= since
            }

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Record the claims of client_msg_ids without a live seq; return every recorded seq."""
        with self._lock:
            recorded: dict[str, int] = {}
            for cid, seq in claims.items():
                key = (conversation_id, cid)
                kept = self._sends.get(key)
                if kept is None or kept[1] < since:
                    # Re-inserted at the end, so that the dict stays in claim-time order.
                    self._sends.pop(key, None)
                    kept = self._sends[key] = (seq, at)
                recorded[cid] = kept[0]
            return recorded

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Claim, allocate and record under the lock: one step, so nothing to wait for."""
        with self._lock:
            recorded: dict[str, int] = {}
            fresh: list[str] = []
            for cid in dict.fromkeys(client_msg_ids):
                kept = self._sends.get((conversation_id, cid))
                if kept is None or kept[1] < since:
                    fresh.append(cid)
                else:
                    recorded[cid] = kept[0]
            first = self._max.get(conversation_id, 0) + 1
            for offset, cid in enumerate(fresh):
                # Re-inserted at the end, so that the dict stays in claim-time order.
                self._sends.pop((conversation_id, cid), None)
                self._sends[conversation_id, cid] = (first + offset, at)
                recorded[cid] = first + offset
            if fresh:
                self._max[conversation_id] = first + len(fresh) - 1
            return recorded

    def prune_sends(self, before: int, limit: int) -> int:
        """Delete the oldest claims recorded before before, at most limit of them."""
        with self._lock:
            old: list[tuple[str, str]] = []
            for key, (_, at) in self._sends.items():
                if at >= before or len(old) >= limit:
                    break
                old.append(key)
            for key in old:
                del self._sends[key]
            return len(old)

    def send_claims(self) -> TableStats:
        """Claims kept, and their ids' UTF-8 bytes plus 16 per claim (seq and time)."""
        with self._lock:
            size = sum(len(c.encode()) + len(m.encode()) + 16 for c, m in self._sends)
            return TableStats(len(self._sends), size)

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """Conversations' counters in id order."""
        with self._lock:
            keys = sorted({*self._max, *self._min})
            rows = [Counters(k, self._max.get(k, 0), self._min.get(k, 0)) for k in keys]
        return _page(rows, lambda row: row.conversation_id, after, limit)

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """Per-user rows in (conversation, user) order."""
        with self._lock:
            keys = sorted({*self._user_min, *self._read})
            rows = [
                UserSeqs(c, u, self._user_min.get((c, u), 0), self._read.get((c, u), 0))
                for c, u in keys
            ]
        return _page(rows, lambda row: _key(row.conversation_id, row.user_id), after, limit)

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """Send claims in (conversation, client_msg_id) order."""
        with self._lock:
            rows = [
                SendClaim(c, cid, seq, at) for (c, cid), (seq, at) in sorted(self._sends.items())
            ]
        return _page(rows, lambda row: _key(row.conversation_id, row.client_msg_id), after, limit)

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """Dict lookups; see SeqStore.counters_of."""
        with self._lock:
            return {
                c: Counters(c, self._max.get(c, 0), self._min.get(c, 0)) for c in conversation_ids
            }

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """Dict lookups; see SeqStore.user_seqs_of."""
        with self._lock:
            return {
                (c, u): UserSeqs(c, u, self._user_min.get((c, u), 0), self._read.get((c, u), 0))
                for c, u in keys
            }

    def batch(self) -> AbstractContextManager[None]:
        """Writes as usual; see SeqStore.batch."""
        return nullcontext()

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


def _key(*parts: str) -> str:
    """A cursor for a composite key; sorts like the tuple of its parts (ids hold no NUL)."""
    return "\x00".join(parts)


def _page(
    rows: Sequence[_R], key: Callable[[_R], str], after: str | None, limit: int
) -> SeqPage[_R]:
    """The rows after cursor ``after`` (rows sorted by key), at most limit of them."""
    chosen = [row for row in rows if after is None or key(row) > after][:limit]
    cursor = key(chosen[-1]) if len(chosen) == limit else None
    return SeqPage(tuple(chosen), cursor)


def _viewed(slot: Slot, viewer: str) -> Viewed:
    """A slot as viewer reads it, and its inline deleter count."""
    deleted_by = viewed_deleters(viewer, viewer in slot.deleted_by, bool(slot.deleted_by))
    return replace(slot, deleted_by=deleted_by), len(slot.deleted_by)


class MemoryCacheBinding:
    """CacheBindingRecord in this process's memory: a memory store is new at every open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._binding: str | None = None

    def record(self, binding: str) -> str:
        """Record binding unless one is recorded; the recorded one."""
        with self._lock:
            if self._binding is None:
                self._binding = binding
            return self._binding

    def replace(self, expected: str, binding: str) -> bool:
        """Set binding if the recorded one is expected."""
        with self._lock:
            if self._binding != expected:
                return False
            self._binding = binding
            return True


class MemoryInvalidationLog:
    """InvalidationLog in this process's memory, beside a memory store (new at every open)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[object, LoggedInvalidation] = {}
        self._next = 0

    def append(self, invalidation: Invalidation, written_at: float) -> None:
        """Add one entry."""
        with self._lock:
            self._next += 1
            self._entries[self._next] = LoggedInvalidation(self._next, written_at, invalidation)

    def read(self, limit: int) -> list[LoggedInvalidation]:
        """The oldest entries, at most limit."""
        with self._lock:
            return list(self._entries.values())[:limit]

    def remove(self, keys: Sequence[object]) -> None:
        """Delete the entries of keys."""
        with self._lock:
            for key in keys:
                self._entries.pop(key, None)
