"""The MessageCache port: per-seq raw slots kept in front of a MessageStore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from domain.model import Slot


@dataclass(frozen=True, slots=True)
class CacheRead:
    """What a cache lookup found, and the ticket that allows filling in the misses.

    ``ticket`` is opaque and taken atomically with the lookup; ``None`` means the cache could
    not be read, so nothing loaded afterwards may be put back.
    """

    slots: dict[int, Slot] = field(default_factory=dict)
    ticket: object | None = None


@runtime_checkable
class MessageCache(Protocol):
    """Caches raw slots (fact + tags) per (conversation_id, seq), without deleter lists.

    Never holds per-viewer views, tombstones or placeholders for seqs with nothing stored.
    Instead of a slot's deleters it may keep, per viewer, whether that viewer deleted it.
    A cache failure must not raise: it behaves as a miss (reads) or a no-op (writes), and an
    invalidation that could not be delivered must never let a later read return the old slot
    from the cache for longer than the cache's documented staleness bound.
    """

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        """Return the cached slots among seqs (misses are absent) and a fill ticket.

        Slots come as ``MessageStore.get`` returns them for viewer: a slot with deleters is
        a miss unless the cache knows whether viewer is one of them.
        """
        ...

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        """Cache slots read from the store after get_many returned ticket.

        The slots come from ``MessageStore.get`` with the same viewer.

        Does nothing when the conversation was invalidated since that get_many, so a reader
        that loaded a slot before a mutation can never cache it after the mutation.
        """
        ...

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> None:
        """Drop the entries of seqs so the next read goes to the store; call after the write."""
        ...

    def close(self) -> None:
        """Release connections. The cache must not be used afterwards."""
        ...
