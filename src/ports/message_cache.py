"""The MessageCache port: per-seq raw slots kept in front of a MessageStore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from imbucket.domain.model import Pick, Slot, Watermarks


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
    invalidation that could not be delivered must never let a later read in this process
    return the old slot from the cache; ``invalidate`` says so by returning False.
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

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> bool:
        """Drop the entries of seqs so the next read goes to the store; call after the write.

        Returns whether the cache took the invalidation now. False: it keeps it to deliver
        later and serves nothing it covers meanwhile, but other processes reading the same
        cache may still see the old entries until someone delivers it (the caller then
        records it where they look: ``ports.invalidation_log``).
        """
        ...

    def close(self) -> None:
        """Release connections. The cache must not be used afterwards."""
        ...


@dataclass(frozen=True, slots=True)
class ViewRead:
    """What a cached pull found: the viewer's watermarks, the slots they select, a fill ticket.

    ``marks`` is None when the watermarks are not cached (then ``slots`` is empty: which
    seqs a pull shows depends on them). ``ticket`` is as in ``CacheRead``.
    """

    marks: Watermarks | None = None
    slots: dict[int, Slot] = field(default_factory=dict)
    ticket: object | None = None


@runtime_checkable
class ViewCache(MessageCache, Protocol):
    """A MessageCache that also keeps the viewers' watermarks, so a pull is one lookup.

    Watermarks are cached in two parts: the conversation's (max_seq, min_seq), shared by every
    viewer, and each user's own floor; a conversation-wide change drops one entry, whatever
    the number of users. The same fill guard covers both parts and the slots: one ticket,
    refused after any invalidation of the conversation (slots or watermarks).
    """

    def get_view(self, conversation_id: str, viewer: str, pick: Pick) -> ViewRead:
        """In one lookup: the viewer's cached watermarks and the cached slots they select.

        The slots are those of ``pick.of(marks)`` that ``get_many(…, viewer)`` would find;
        a cache may find fewer (misses) and callers ignore any seq outside ``pick.of(marks)``:
        the domain's rule decides what a pull shows. ``marks`` is set only when both parts
        are cached.
        """
        ...

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        """Cache marks (unless None) and slots, read from the store after get_view's ticket.

        ``marks`` come from ``SeqStore.watermarks(conversation_id, viewer)`` (or a ViewReads
        that equals it), the slots from ``MessageStore.get`` for viewer. Nothing is written
        when the conversation was invalidated since that get_view.
        """
        ...

    def invalidate_marks(self, conversation_id: str, user_id: str | None = None) -> bool:
        """Drop cached watermarks; call after the SeqStore write that moved them.

        ``user_id`` None drops the conversation's part (max_seq, min_seq: every viewer's),
        else that user's floor. Undeliverable invalidations are handled, and reported by the
        result, as in ``invalidate``.
        """
        ...
