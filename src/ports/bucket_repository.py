"""The BucketRepository port: the few storage primitives the bucket engine needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from domain.layout import BucketLayout
from domain.model import Message, Revoke, Slot, SlotPatch, StoreStats


@runtime_checkable
class BucketRepository(Protocol):
    """Buckets of ``layout.size`` slots addressed by doc_id (``"{conversation_id}:{index}"``).

    Every bucket always holds exactly ``layout.size`` slots. Each method is one round trip
    to the engine. Methods never create a bucket except ``create_bucket``; they report a
    missing bucket by returning False and let the engine decide.
    """

    layout: BucketLayout

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Store messages by slot index iff the bucket exists and the named slots are free.

        A free slot holds no message and is not purged. All or nothing: returns True if
        written, else writes nothing.
        """
        ...

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Insert a new bucket holding ``slots`` at their indexes and empty slots elsewhere.

        Returns False and writes nothing when a bucket with doc_id exists already (the
        duplicate-key outcome a concurrent creator causes).
        """
        ...

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Read the given slot indexes of one or many buckets in one round trip.

        Returns per existing doc_id the requested slots by index (empty slots included);
        buckets that do not exist are absent.
        """
        ...

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Set a slot's revoke iff the bucket exists, the slot is not revoked and not purged."""
        ...

    def patch(self, doc_id: str, patches: Mapping[int, SlotPatch]) -> bool:
        """Apply tag changes to slots of one bucket (set-adds are idempotent).

        Returns False, writing nothing, when the bucket does not exist.
        """
        ...

    def stats(self) -> StoreStats:
        """Footprint: messages stored, buckets, data and index bytes."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
