"""How many deleters a bucket keeps inline, and the arithmetic that keeps it under its byte limit.

A bucket holds, per slot, one message (at most ``limits.max_message_bytes`` stored), one
revoke, at most ``EARLY_READERS_KEPT`` early readers and the flags; all of that is bounded
by the limits. Only the deleters can grow without end, so a bucket keeps at most
``deleters_per_slot`` of them inline per slot and ``deleters_per_bucket`` in all, the
bucket's remaining bytes divided by the largest id; further deleters spill to a side table.
docs/buckets.md walks through the numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from imbucket.domain.errors import ConfigError
from imbucket.domain.model import DEFAULT_LIMITS, Limits, Slot, SlotPatch
from imbucket.domain.sizes import (
    BOOL_BYTES,
    DOC_OVERHEAD,
    ENTRY_OVERHEAD,
    FIELD_OVERHEAD,
    entry_bytes,
    id_bytes,
    int_field_bytes,
    revoke_bytes,
    text_field_bytes,
)

# Two different early readers decide whether a message is read by someone other than its
# sender (at least one of them is not the sender), so a third one changes nothing.
EARLY_READERS_KEPT = 2
DEFAULT_MAX_DELETERS_PER_SLOT = 1000
DEFAULT_MAX_BUCKET_BYTES = 8 * 1024 * 1024
# The largest per-slot cap whose array indexes fit the 5 digits ENTRY_OVERHEAD allows for.
MAX_DELETERS_PER_SLOT = 100_000


@dataclass(frozen=True, slots=True)
class TagBudget:
    """How many user ids a bucket keeps inline; set-adds beyond it are refused by the writes."""

    deleters_per_slot: int = DEFAULT_MAX_DELETERS_PER_SLOT
    deleters_per_bucket: int = DEFAULT_MAX_DELETERS_PER_SLOT
    readers_per_slot: int = EARLY_READERS_KEPT

    @staticmethod
    def default(size: int) -> TagBudget:
        """The budget of buckets of size slots under the default limits and settings."""
        return BucketBounds.of(size, DEFAULT_LIMITS).budget()

    def conditions(self, patches: Mapping[int, SlotPatch]) -> BudgetConditions:
        """What a bucket must satisfy for patches to keep its inline tags within budget."""
        kept = sorted(index for index, patch in patches.items() if not patch.purge)
        return BudgetConditions(
            self,
            deleting=tuple(i for i in kept if patches[i].add_deleted_by is not None),
            reading=tuple(i for i in kept if patches[i].add_read_by is not None),
        )


@dataclass(frozen=True, slots=True)
class BudgetConditions:
    """The budget rule of one patch (BucketRepository.patch), checked atomically with it.

    Every slot in ``deleting`` must hold fewer than ``budget.deleters_per_slot`` deleters and
    every slot in ``reading`` fewer than ``budget.readers_per_slot`` early readers; when
    something is deleting, the bucket's deleters plus ``len(deleting)`` must not exceed
    ``budget.deleters_per_bucket``. Memory evaluates ``holds``; SQL and MongoDB render the
    same conditions into the filter of their update.
    """

    budget: TagBudget
    deleting: tuple[int, ...]  # slots gaining a deleter, ascending
    reading: tuple[int, ...]  # slots gaining an early reader, ascending

    def holds(self, bucket: Sequence[Slot]) -> bool:
        """Whether the bucket's slots (by index) satisfy the conditions."""
        budget = self.budget
        if any(len(bucket[i].deleted_by) >= budget.deleters_per_slot for i in self.deleting):
            return False
        if any(len(bucket[i].read_by) >= budget.readers_per_slot for i in self.reading):
            return False
        if not self.deleting:
            return True
        inline = sum(len(slot.deleted_by) for slot in bucket)
        return inline + len(self.deleting) <= budget.deleters_per_bucket


@dataclass(frozen=True, slots=True)
class BucketBounds:
    """The worst-case size of a bucket of ``size`` slots under the given limits."""

    size: int
    max_bucket_bytes: int
    deleters_per_slot: int
    entry_bytes: int  # one user id in a tag array
    slot_bytes: int  # one slot without its deleters: message, revoke, readers, flags, keys
    frame_bytes: int  # the bucket around its slots: doc_id, _id, keys

    @classmethod
    def of(
        cls,
        size: int,
        limits: Limits,
        deleters_per_slot: int = DEFAULT_MAX_DELETERS_PER_SLOT,
        max_bucket_bytes: int = DEFAULT_MAX_BUCKET_BYTES,
    ) -> BucketBounds:
        """The bounds for a layout size, the input limits and the bucket settings."""
        entry = entry_bytes(limits.max_id_length)
        tags = (
            text_field_bytes("msg", limits.max_message_bytes)
            + text_field_bytes("revoke", revoke_bytes(limits.max_id_length))
            + text_field_bytes("del_list", DOC_OVERHEAD)  # its entries count in the budget
            + text_field_bytes("read_by", DOC_OVERHEAD + EARLY_READERS_KEPT * entry)
            + sum(text_field_bytes(flag, BOOL_BYTES) for flag in ("is_read", "purged", "spilled"))
        )
        slot = ENTRY_OVERHEAD + DOC_OVERHEAD + tags
        # doc_id is the conversation id, a colon and the bucket index; MongoDB adds an _id.
        frame = (
            DOC_OVERHEAD
            + text_field_bytes("doc_id", id_bytes(limits.max_id_length) + 1 + 19)
            + int_field_bytes("_id")
            + len("msgs")
            + FIELD_OVERHEAD
            + DOC_OVERHEAD
        )
        return cls(size, max_bucket_bytes, deleters_per_slot, entry, slot, frame)

    @property
    def fixed_bytes(self) -> int:
        """The bucket with every slot at its largest, before any deleter."""
        return self.frame_bytes + self.size * self.slot_bytes

    @property
    def deleters_per_bucket(self) -> int:
        """How many of the longest ids still fit once every slot is at its largest."""
        return max(0, (self.max_bucket_bytes - self.fixed_bytes) // self.entry_bytes)

    @property
    def worst_case_bytes(self) -> int:
        """The largest bucket the budget allows: never above max_bucket_bytes."""
        return self.fixed_bytes + self.deleters_per_bucket * self.entry_bytes

    def budget(self) -> TagBudget:
        """The inline limits the bucket state machine enforces."""
        return TagBudget(self.deleters_per_slot, self.deleters_per_bucket)

    def check(self) -> None:
        """ConfigError unless one slot can hold its full cap of deleters inline."""
        if self.deleters_per_bucket >= self.deleters_per_slot:
            return
        needed = self.fixed_bytes + self.deleters_per_slot * self.entry_bytes
        raise ConfigError(
            f"a bucket of {self.size} slots may need {needed} bytes "
            f"({self.size} x {self.slot_bytes} per slot at the message and id limits, "
            f"{self.frame_bytes} around them, {self.deleters_per_slot} deleters x "
            f"{self.entry_bytes}), above store.max_bucket_bytes = {self.max_bucket_bytes}: "
            "raise store.max_bucket_bytes, or lower store.bucket_size, "
            "limits.max_message_bytes, limits.max_id_length or store.max_deleters_per_slot"
        )
