"""Planning and writing a tag write's bucket patches (the write half of BucketMessageStore).

A plan says, for one bucket's slots, what to write and which deleters spill to the side
table; ``BucketPatching`` writes every bucket's plan in one round trip, and reads again and
writes one by one only the buckets that were refused, lost to a concurrent creator, or
whose outcome the engine could not tell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from imbucket.adapters import contention
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import EMPTY_SLOT, Slot, SlotPatch
from imbucket.domain.tags import MAX_ROUNDS, Decision, deleting_for
from imbucket.ports.bucket_repository import BucketRepository, Spilled

# The slots of one bucket that an operation touches, by slot index; None: no such bucket.
Slots = dict[int, Slot | None]
# Inline deleters per slot index of one bucket (from a viewer's read).
Counts = dict[int, int]
# Side-table deleters by doc_id and slot index (what BucketRepository.read_spilled returns).
SpilledBy = Mapping[str, Mapping[int, set[str]]]
# What to write to a bucket given its slots and whether deleters may still go inline:
# the patches, and the slot indexes whose deleter goes to the side table.
Plan = Callable[[Slots, bool], tuple[dict[int, SlotPatch], list[int]]]
# Reads the given slot indexes of buckets again (after a write was refused or lost).
Reread = Callable[[dict[str, list[int]]], dict[str, Slots]]


class BucketPatching:
    """Writes plans to a repository's buckets within a tag budget (a base of the store)."""

    repository: BucketRepository
    layout: BucketLayout
    budget: TagBudget

    def _deleting(self, user_id: str, counts: Counts) -> Plan:
        """Delete-for-me by imbucket.domain.tags.deleting_for: inline while the budget allows.

        Beyond it the slot is flagged and the deleter spills to the side table. The slots
        come from user_id's own read (``read_viewed``): counts holds their inline deleters.
        """
        budget, decide = self.budget, deleting_for(user_id)

        def plan(slots: Slots, inline: bool) -> tuple[dict[int, SlotPatch], list[int]]:
            patches: dict[int, SlotPatch] = {}
            spills: list[int] = []
            # A missing bucket is created with the patches: its budget is checked here.
            room = budget.deleters_per_bucket if all(s is None for s in slots.values()) else None
            for index, found in slots.items():
                slot = EMPTY_SLOT if found is None else found
                patch = decide(slot)
                if patch is None:
                    continue
                fits = counts.get(index, 0) < budget.deleters_per_slot and room != 0
                if inline and fits and not slot.spilled:
                    patches[index] = patch
                    room = None if room is None else room - 1
                else:
                    spills.append(index)
                    if not slot.spilled:
                        patches[index] = SlotPatch(mark_spilled=True)
            return patches, spills

        return plan

    def _write_all(
        self,
        buckets: dict[str, Slots],
        plan_of: Callable[[str], Plan],
        reread: Reread,
        deleter: str | None = None,
    ) -> tuple[int, list[tuple[str, int]]]:
        """Write every bucket's plan in one round trip: (slots changed, slots left to spill).

        Existing buckets take one ``patch_many``, missing ones one ``create_buckets`` (a tag
        write on seqs whose buckets do not exist yet creates them). Buckets refused (a slot
        or the bucket is full), lost to a concurrent creator, or whose outcome the engine
        could not tell are read again, together, and written one by one by ``_write``.

        With deleter (delete_for), the deleter's side-table entries of the slots a patch
        flags ``spilled`` ride on that patch and count as changed once it is written (the
        slot was not flagged at the read, so it had no entries); the other slots to spill
        are returned for ``add_spilled``.
        """
        patches: dict[str, dict[int, SlotPatch]] = {}
        fresh: dict[str, dict[int, Slot]] = {}
        planned: dict[str, tuple[int, list[int]]] = {}
        riding: dict[str, list[int]] = {}  # slots whose deleter rides on the bucket's patch
        entries: list[Spilled] = []
        for doc_id, slots in buckets.items():
            writes, spills = plan_of(doc_id)(slots, True)
            inline = sum(not patch.mark_spilled for patch in writes.values())
            if writes and missing(slots):
                fresh[doc_id] = {index: EMPTY_SLOT.patched(p) for index, p in writes.items()}
            elif writes:
                patches[doc_id] = writes
                if deleter is not None:
                    riding[doc_id] = [i for i in spills if _flags(writes, i)]
                    spills = [i for i in spills if i not in riding[doc_id]]
                    entries += [(doc_id, index, deleter) for index in riding[doc_id]]
            planned[doc_id] = (inline + len(riding.get(doc_id, ())), spills)
        written = self._patch_all(patches, entries)
        created = self.repository.create_buckets(fresh) if fresh else set()
        unknown = set(patches) if written is None else set()
        refused = set() if written is None else set(patches) - written
        lost = set(fresh) - created
        for _ in lost:
            contention.record(contention.BUCKET_CREATE_LOST)
        again = refused | lost | unknown
        changed = sum(planned[doc_id][0] for doc_id in buckets if doc_id not in again)
        spilled = [(d, i) for d in buckets if d not in again for i in planned[d][1]]
        if not again:
            return changed, spilled
        current = reread({doc_id: list(buckets[doc_id]) for doc_id in again})
        for doc_id in sorted(again):
            plan, slots = plan_of(doc_id), current[doc_id]
            if doc_id in unknown and _landed(plan(slots, True)[0], riding.get(doc_id, ())):
                changed += planned[doc_id][0]
            count, spills = self._write(doc_id, slots, plan, reread, doc_id not in refused)
            changed += count
            spilled += [(doc_id, index) for index in spills]
        return changed, spilled

    def _patch_all(
        self, patches: dict[str, dict[int, SlotPatch]], spills: list[Spilled]
    ) -> set[str] | None:
        """The buckets written by one ``patch`` or ``patch_many`` (several, or with spills).

        spills: side-table entries riding on the patches (``BucketRepository.patch_many``).
        """
        if len(patches) > 1 or spills:
            return self.repository.patch_many(patches, self.budget, spills)
        return {d for d, p in patches.items() if self.repository.patch(d, p, self.budget)}

    def _write(
        self, doc_id: str, slots: Slots, plan: Plan, reread: Reread, inline: bool = True
    ) -> tuple[int, list[int]]:
        """Write one bucket's plan within the budget: (slots changed inline, slots to spill).

        A patch refused by an existing bucket means a slot or the bucket is full: the slots
        are read again (by reread) and the plan redone with every deleter spilling (inline
        False). A missing bucket is created with the patches.
        """
        for _ in range(MAX_ROUNDS):
            patches, spills = plan(slots, inline)
            changed = sum(not patch.mark_spilled for patch in patches.values())
            if not patches:
                return changed, spills
            if missing(slots):
                fresh = {index: EMPTY_SLOT.patched(patch) for index, patch in patches.items()}
                if self.repository.create_bucket(doc_id, fresh):
                    return changed, spills
                contention.record(contention.BUCKET_CREATE_LOST)
            elif self.repository.patch(doc_id, patches, self.budget):
                return changed, spills
            else:
                inline = False
            slots = reread({doc_id: list(slots)})[doc_id]
        raise StoreUnavailable(f"tag write to {doc_id} did not settle under contention")

    def _reread(self, wanted: dict[str, list[int]]) -> dict[str, Slots]:
        """The inline slots of wanted by bucket, read again in one round trip."""
        return by_bucket(wanted, self.repository.read(wanted))


def by_bucket(
    wanted: Mapping[str, Sequence[int]], found: Mapping[str, Mapping[int, Slot]]
) -> dict[str, Slots]:
    """Every wanted slot by bucket, from a repository's read (a missing bucket: None)."""
    return {
        doc_id: {index: _slot(found.get(doc_id), index) for index in indexes}
        for doc_id, indexes in wanted.items()
    }


def missing(slots: Slots) -> bool:
    """Whether the read found no bucket (every slot of it None)."""
    return all(slot is None for slot in slots.values())


def _slot(bucket: Mapping[int, Slot] | None, index: int) -> Slot | None:
    return None if bucket is None else bucket[index]


def planned(decide: Decision) -> Plan:
    """A plan writing what decide returns for each slot, spilling nothing."""

    def plan(slots: Slots, inline: bool) -> tuple[dict[int, SlotPatch], list[int]]:
        patches = {
            index: patch
            for index, slot in slots.items()
            if (patch := decide(EMPTY_SLOT if slot is None else slot)) is not None
        }
        return patches, []

    return plan


def _landed(left: Mapping[int, SlotPatch], riding: Sequence[int]) -> bool:
    """Whether a patch whose outcome is unknown landed, from what is left to write after it.

    Written or not: once nothing is left to write inline and no slot whose deleter rode on
    the patch is left unflagged, the patch landed (or a concurrent writer wrote the same),
    and its changes count.
    """
    flagging = any(_flags(left, index) for index in riding)
    return not flagging and not any(not patch.mark_spilled for patch in left.values())


def _flags(patches: Mapping[int, SlotPatch], index: int) -> bool:
    """Whether patches flag slot index ``spilled``."""
    patch = patches.get(index)
    return patch is not None and patch.mark_spilled
