"""CachedMessageStore: any MessageStore behind a MessageCache, read-through and invalidated.

Reads ask the cache first, load every miss from the store in one call and put back what was
loaded (guarded by the cache's fill ticket). Writes go to the store first and then invalidate
the seqs they may have changed, also when the store write failed half-way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TypeVar

from imbucket.domain.model import InsertResult, Message, Revoke, Slot, StoreStats
from imbucket.domain.scan import SlotPage
from imbucket.domain.tags import Guard
from imbucket.ports.message_cache import MessageCache
from imbucket.ports.message_store import MessageStore

T = TypeVar("T", int, bool)


class CachedMessageStore:
    """A MessageStore decorator: read-through per-seq cache, invalidated after every write."""

    def __init__(self, store: MessageStore, cache: MessageCache) -> None:
        self.store = store
        self.cache = cache
        self.layout = store.layout

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Cached slots, plus one store read for all misses, which are then cached.

        With a viewer both the cache and the store answer for that viewer (no deleter list
        travels); without one, slots with deleters always come from the store.
        """
        wanted = list(dict.fromkeys(seqs))
        if not wanted:
            return {}
        found = self.cache.get_many(conversation_id, wanted, viewer)
        misses = [seq for seq in wanted if seq not in found.slots]
        if not misses:
            return dict(found.slots)
        loaded = self.store.get(conversation_id, misses, viewer)
        fill = {seq: slot for seq, slot in loaded.items() if not slot.is_empty}
        if fill and found.ticket is not None:
            self.cache.put_many(conversation_id, fill, found.ticket, viewer)
        return {**found.slots, **loaded}

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Insert into the store, then invalidate the seqs that received a message."""
        result: InsertResult | None = None
        try:
            result = self.store.insert(conversation_id, messages)
            return result
        finally:
            # Only filled slots change; duplicates, conflicts and purged seqs stay as cached.
            changed = [m.seq for m in messages] if result is None else result.inserted
            self._invalidate(conversation_id, changed)

    def insert_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, InsertResult]:
        """Insert into the store in one call, then invalidate what may have changed."""
        results: dict[str, InsertResult] = {}
        try:
            results = self.store.insert_many(batches)
            return results
        finally:
            for conversation_id, messages in batches.items():
                result = results.get(conversation_id)
                changed = [m.seq for m in messages] if result is None else result.inserted
                self._invalidate(conversation_id, changed)

    def get_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """``get`` per conversation, each through the cache."""
        return {
            conversation_id: self.get(conversation_id, seqs)
            for conversation_id, seqs in wanted.items()
        }

    def batch(self) -> AbstractContextManager[None]:
        """No batching here: each write must be committed before its seqs are invalidated.

        (Invalidating inside an open transaction would let a reader cache the old slot.)
        """
        return nullcontext()

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Revoke in the store, then invalidate seq if it changed."""
        return self._write(
            conversation_id, [seq], lambda: self.store.revoke(conversation_id, seq, revoke)
        )

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        """Delete for user_id in the store, then invalidate seqs if any changed."""
        write = partial(self.store.delete_for, conversation_id, seqs, user_id, guard)
        return self._write(conversation_id, seqs, write)

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        """Mark read in the store, then invalidate seqs if any changed."""
        write = partial(self.store.mark_read, conversation_id, seqs, reader_id, guard)
        return self._write(conversation_id, seqs, write)

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        """Purge in the store, then invalidate seqs if any changed."""
        return self._write(
            conversation_id, seqs, partial(self.store.purge, conversation_id, seqs, guard)
        )

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """The store's own scan, past the cache (the store is the source of truth)."""
        return self.store.scan(after, limit)

    def stats(self) -> StoreStats:
        """The store's footprint (the cache is not counted)."""
        return self.store.stats()

    def close(self) -> None:
        """Close the cache and the store."""
        try:
            self.cache.close()
        finally:
            self.store.close()

    def _write(self, conversation_id: str, seqs: Sequence[int], write: Callable[[], T]) -> T:
        """Run a tag write, then invalidate seqs unless it reported no change (False or 0)."""
        changed: T | None = None
        try:
            changed = write()
            return changed
        finally:
            # changed is None when the store raised: part of the write may have landed.
            if changed is None or changed:
                self._invalidate(conversation_id, seqs)

    def _invalidate(self, conversation_id: str, seqs: Iterable[int]) -> None:
        unique = list(dict.fromkeys(seqs))
        if unique:
            self.cache.invalidate(conversation_id, unique)
