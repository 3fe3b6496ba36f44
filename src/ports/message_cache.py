"""The MessageCache port: per-seq raw slots kept in front of a MessageStore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from domain.model import Slot


@runtime_checkable
class MessageCache(Protocol):
    """Caches raw slots (fact + tags) per (conversation_id, seq).

    Never holds per-viewer views, tombstones or placeholders for seqs with nothing stored.
    A cache failure must not raise: it behaves as a miss (reads) or a no-op (writes).
    """

    def get_many(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """Return the cached slots among seqs; misses are absent."""
        ...

    def put_many(self, conversation_id: str, slots: Mapping[int, Slot]) -> None:
        """Cache the given slots with the configured TTL."""
        ...

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> None:
        """Drop the entries of seqs so the next read goes to the store."""
        ...
