"""The BucketRepository port: the few storage primitives the bucket state machine needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Message, Revoke, Slot, SlotPatch, StoreStats

# One deleter kept outside its bucket: (doc_id, slot index, user_id).
Spilled = tuple[str, int, str]
# A slot as one viewer reads it (deleted_by as in MessageStore.get with a viewer) and the
# number of deleters it stores inline (what the delete-for-me budget needs).
Viewed = tuple[Slot, int]


@runtime_checkable
class BucketRepository(Protocol):
    """Buckets of ``layout.size`` slots addressed by doc_id (``"{conversation_id}:{index}"``).

    Every bucket always holds exactly ``layout.size`` slots. Each method is one round trip
    to the engine (``patch_many``: where the engine allows, see there). Methods never
    create a bucket except ``create_bucket``; they report a missing bucket by returning
    False and let the state machine decide.
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

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """``create_bucket`` of many buckets in as few round trips as the engine allows.

        Returns the doc_ids created; a bucket that existed already is left as it was. The
        default creates them one by one.
        """
        return {doc_id for doc_id, slots in buckets.items() if self.create_bucket(doc_id, slots)}

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Read the given slot indexes of one or many buckets in one round trip.

        Returns per existing doc_id the requested slots by index (empty slots included);
        buckets that do not exist are absent.
        """
        ...

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """``read`` scoped to one viewer, in one round trip, whatever the number of deleters.

        Each slot's inline ``deleted_by`` is ``{viewer}``, ``{OTHER_DELETERS}`` or empty
        (``imbucket.domain.model.viewed_deleters``), computed by the engine; next to it the count of
        inline deleters.
        """
        ...

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """Set a slot's revoke iff the bucket exists, the slot is not revoked and not purged."""
        ...

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """Apply tag changes to slots of one bucket (set-adds are idempotent).

        Returns False, writing nothing, when the bucket does not exist, or when budget is
        given and the patch would overrun it: every slot getting a deleter must hold fewer
        than ``deleters_per_slot`` inline, every slot getting an early reader fewer than
        ``readers_per_slot``, and the bucket, counting one more deleter per such slot, at
        most ``deleters_per_bucket``. The check and the write are one atomic step.
        """
        ...

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """``patch`` of several buckets (by doc_id) in one round trip where the engine allows.

        Each bucket's patch is applied or refused on its own, exactly as ``patch`` would.
        Returns the doc_ids written; None when some but not all were written and the engine
        cannot tell which (it reports only a count): the caller reads the buckets again.
        The default patches bucket by bucket (one round trip each, every answer known).

        spills are side-table entries (as ``add_spilled`` takes them) riding on the patches:
        each doc_id among ``patches``. A bucket's entries are added (a set-add) if and only
        if its patch is written, in the same round trip and atomically with it where the
        engine allows (SQL: the same statement), else right after it; with a None outcome,
        those of the buckets written were added and no others. The caller passes the
        deleters of slots the same patch flags ``spilled`` (none of whose entries can exist
        yet), so it counts them as new without asking.
        """
        written = {d for d, slots in patches.items() if self.patch(d, slots, budget)}
        landed = [entry for entry in spills if entry[0] in written]
        if landed:
            self.add_spilled(landed)
        return written

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """Store deleters in the side table (a set-add); returns how many were not there yet."""
        ...

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """The side-table deleters of the given slots in one round trip; empty slots absent.

        With ``viewer`` only that user's entries (a lookup by key, never the whole list).
        """
        ...

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """Delete the side-table deleters of the given slots."""
        ...

    def scan_buckets(self, after: str | None, limit: int) -> list[tuple[str, list[Slot]]]:
        """Up to ``limit`` >= 1 whole buckets whose doc_id sorts after ``after``.

        None starts from the first. Engine's doc_id order, inline slots only, one round trip.

        Spilled deleters are not merged: the state machine reads them with ``read_spilled``.
        """
        ...

    def bucket_bytes(self, doc_id: str) -> int | None:
        """Stored size of a bucket in the engine's own encoding; None if it does not exist."""
        ...

    def stats(self) -> StoreStats:
        """Footprint: messages stored, buckets, data and index bytes."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
