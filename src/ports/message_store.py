"""The MessageStore port: where facts and tags of a conversation live."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import InsertResult, Message, Revoke, Slot, StoreStats
from imbucket.domain.scan import SlotPage
from imbucket.domain.tags import Guard


@runtime_checkable
class MessageStore(Protocol):
    """Stores messages by (conversation_id, seq) with per-seq tags.

    Callers (the service) validate arguments first; a store may assume well-formed input
    but must never lose or overwrite a stored fact. Seqs passed to the tag methods are
    allocated seqs whose message may not be stored yet: tags written then are kept and apply
    once the message lands. Driver failures surface as ``StoreUnavailable``.
    """

    # The bucket size recorded with the data, on every store, rows included: the service
    # reads it to show where a seq sits (``imbucket inspect``) and a scan page is bounded by
    # it; a store refuses to open data recorded with another size.
    layout: BucketLayout

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store each message in its empty seq slot.

        Identical redelivery is reported in ``duplicates`` and changes nothing; a different
        message for an occupied seq is reported in ``conflicts`` and stored nowhere; a message
        for a purged seq is reported in ``purged`` and not stored. Tags already on a slot are
        kept. Concurrent inserts of overlapping batches store every message exactly once.
        """
        ...

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Return the slots of the given seqs that hold a message, a tag or a purge mark.

        Seqs with nothing stored are absent from the result (never empty Slots). Order of the
        dict is unspecified; callers order by their own seq list.

        With ``viewer`` the read is scoped to that user and independent of how many users
        deleted a seq: ``deleted_by`` is ``{viewer}`` if the viewer deleted it,
        ``{OTHER_DELETERS}`` if only others did, else empty (``imbucket.domain.model``); the engine
        answers it, so no deleter list travels. Without it (migrate, scan, inspect) every
        deleter is returned.
        """
        ...

    def insert_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, InsertResult]:
        """``insert`` of several conversations' messages at once, by conversation_id.

        Every outcome and guarantee of ``insert`` holds per conversation; the store writes
        what does not exist yet (buckets, rows) in as few round trips as the engine allows
        (bulk loading: ``imbucket migrate``). The default inserts conversation by
        conversation.
        """
        return {conv: self.insert(conv, messages) for conv, messages in batches.items()}

    def get_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """``get`` of several conversations at once, in one round trip where the engine allows.

        Every conversation of wanted is a key of the result (``{}`` when nothing is stored).
        The default reads conversation by conversation.
        """
        return {conv: self.get(conv, seqs) for conv, seqs in wanted.items()}

    def batch(self) -> AbstractContextManager[None]:
        """A block whose writes the engine may commit together (one SQL transaction).

        For bulk loading. Writes keep their meaning; on SQL they become visible to others
        when the block ends, a failure inside rolls the block's writes back and raises
        ``StoreUnavailable`` (every write is idempotent: run the block again), and a batch
        opened inside another joins it. Other engines write as usual (the default).
        """
        return nullcontext()

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record a revoke on seq; False (nothing written) if already revoked or purged."""
        ...

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        """Add user_id to each seq's deleted_by (a set-add). Returns how many seqs changed.

        Purged seqs are skipped; repeating the call changes nothing and returns 0. ``guard``,
        when given, is called once after the store's read and before anything is written,
        with the seqs holding nothing (``domain.tags.Guard``); what it raises propagates and
        nothing is written. The same holds for ``mark_read`` and ``purge``.
        """
        ...

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        """Mark seqs read by reader_id; a reader's own messages are never marked.

        For a seq whose message is not stored yet the reader is remembered in ``read_by``.
        Returns how many seqs changed.
        """
        ...

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        """Physically delete seqs. Returns how many seqs became purged.

        Message and tags are dropped and the slot stays purged for good: later inserts
        report it in ``purged``.
        """
        ...

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """One page of everything stored: every slot ``get`` would return, once each.

        Pass ``after=None`` for the first page, then each page's ``cursor`` until it is None.
        A page holds at most ``max(limit, layout.size)`` slots (``limit`` >= 1; a bucket
        store reads whole buckets), and may hold fewer while more follow, in
        the engine's own order, which is stable for a store nobody writes to. Slots written
        during a scan may or may not be seen; nothing present throughout is skipped. Memory
        and each round trip are bounded by the page, whatever the size of a conversation.
        """
        ...

    def stats(self) -> StoreStats:
        """Footprint of everything stored: messages, documents or rows, data and index bytes."""
        ...

    def close(self) -> None:
        """Release connections. The store must not be used afterwards."""
        ...
