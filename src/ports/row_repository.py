"""The RowRepository port: the few storage primitives the row state machine needs.

The twin of ``BucketRepository``: ``imbucket.adapters.row.RowMessageStore`` holds the insert state
machine (insert, collide, classify, fill) and the tag rules once, and a row repository only
stores and reads rows. A row holds one seq of a conversation: its message, revoke, is_read,
purged mark and tags; it exists once the seq holds anything and is never deleted (a purge
wipes it and marks it purged for good).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Message, Revoke, Slot, SlotPatch, StoreStats
from imbucket.domain.scan import SlotPage


@runtime_checkable
class RowRepository(Protocol):
    """Rows keyed by (conversation_id, seq). Driver failures surface as ``StoreUnavailable``.

    Empty input (no messages, seqs or patches) costs no round trip; a repository may still
    reject ids its engine cannot store with a typed error.

    ``layout`` is the bucket size recorded with the data: a row has no bucket, but the
    repository refuses to open data recorded with another size, because what callers see
    (inspect, doc ids) depends on it.
    """

    layout: BucketLayout

    def insert_new(self, conversation_id: str, messages: Sequence[Message]) -> set[int]:
        """Store each message whose seq has no row yet; returns the seqs not stored.

        Messages are sorted by seq with distinct seqs. A seq whose row exists is not stored
        (it collides): its row holds a message, is purged, or holds only tags. A repository
        may also fill a tag-only row here, as ``fill`` does, and then not report it. May take
        more than one round trip for a batch too large for one statement.
        """
        ...

    def insert_new_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, set[int]]:
        """``insert_new`` of several conversations in as few statements as the engine allows.

        Returns, by conversation_id, the seqs not stored (absent: every one was stored).
        The default inserts conversation by conversation.
        """
        missed = {conv: self.insert_new(conv, messages) for conv, messages in batches.items()}
        return {conv: seqs for conv, seqs in missed.items() if seqs}

    def read_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """``read`` of several conversations in one round trip; absent: no row exists.

        The default reads conversation by conversation.
        """
        return {conv: self.read(conv, seqs) for conv, seqs in wanted.items()}

    def read(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """The slots of the rows of seqs that exist, tags included, in one round trip.

        Seqs without a row are absent; a row holding nothing may be absent or empty. With
        ``viewer`` each slot's ``deleted_by`` is scoped as ``MessageStore.get`` describes
        (``{viewer}``, ``{OTHER_DELETERS}`` or empty), answered by the engine: what travels
        does not grow with the number of deleters.
        """
        ...

    def read_state(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Slot]:
        """Like ``read``, but deleters and early readers may be left out (a cheaper read).

        Message, revoke, is_read and purged are exact; enough to classify an insert or
        decide a deletion.
        """
        ...

    def fill(self, conversation_id: str, message: Message) -> bool:
        """Put message into its seq's row iff the row holds no message and is not purged.

        Tags already on the row are kept. A repository may create the row if there is none.
        False (nothing written) when another writer stored a message or purged it first.
        """
        ...

    def set_revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record revoke iff the seq is neither revoked nor purged, creating its row if none.

        False when nothing was written: the row is revoked or purged, or another writer
        created the row meanwhile; the caller reads the row to tell which.
        """
        ...

    def patch(self, conversation_id: str, patches: Mapping[int, SlotPatch]) -> int:
        """Apply tag changes to the rows of seqs, creating rows that do not exist yet.

        Set-adds are idempotent; a purge wipes the row, drops its tags and wins over any tag
        change. Returns how many seqs changed (a repository that cannot tell counts every
        patch).
        """
        ...

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """One page of at most ``limit`` >= 1 rows in key order; see ``MessageStore.scan``.

        Rows holding nothing are left out; ``cursor`` is None when nothing follows.
        """
        ...

    def stats(self) -> StoreStats:
        """Footprint: messages stored, rows, data and index bytes."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
