"""BucketMessageStore: the MessageStore of every bucket backend, written once.

It holds OpenIM's insert state machine (insert into the bucket, else create it), improved so that
one bucket's batch is written by one conditional update, and so that tags written to a
bucket that does not exist yet create it instead of being dropped.

It also keeps buckets bounded (docs/buckets.md): a slot keeps at most
``budget.deleters_per_slot`` deleters inline and a bucket ``budget.deleters_per_bucket``;
further deleters spill to the repository's side table and the slot is flagged ``spilled``,
so that a read pays the extra round trip for the side table only when a slot it returns
has spilled deleters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from enum import Enum

from imbucket.adapters import contention
from imbucket.adapters.bucket_patches import (
    BucketPatching,
    Counts,
    Slots,
    SpilledBy,
    by_bucket,
    planned,
)
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Slot,
    StoreStats,
    viewed_deleters,
)
from imbucket.domain.scan import ScannedSlot, SlotPage
from imbucket.domain.tags import (
    MAX_ROUNDS,
    Decision,
    Guard,
    TagWrites,
    classify,
    purging,
)
from imbucket.ports.bucket_repository import BucketRepository, Spilled


class FirstWrite(Enum):
    """What an insert's first write did to one bucket (``BucketMessageStore._first_writes``)."""

    WRITTEN = "written"  # the bucket holds the messages now: filled, or created holding them
    MISSED = "missed"  # the fill matched nothing: a slot is taken, or the bucket is missing
    EXISTS = "exists"  # the create found the bucket there: fill it next


class BucketMessageStore(BucketPatching, TagWrites):
    """MessageStore over any BucketRepository (memory, SQL JSON, MongoDB)."""

    def __init__(self, repository: BucketRepository, budget: TagBudget | None = None) -> None:
        self.repository = repository
        self.layout: BucketLayout = repository.layout
        self.budget = budget or TagBudget.default(self.layout.size)

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store messages; see MessageStore.insert."""
        outcome: dict[int, InsertOutcome] = {}
        by_seq = {message.seq: message for message in messages}
        buckets = {
            doc_id: {self.layout.slot_index(seq): by_seq[seq] for seq in seqs}
            for doc_id, seqs in self.layout.group(conversation_id, by_seq).items()
        }
        first = self._first_writes(buckets) if buckets else {}
        for doc_id, pending in buckets.items():
            done = first.get(doc_id)
            if done is FirstWrite.WRITTEN:
                outcome.update((m.seq, InsertOutcome.INSERTED) for m in pending.values())
            else:
                self._insert_bucket(doc_id, pending, outcome, done)
        return InsertResult.of(messages, outcome)

    def _first_writes(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        """The first writes of an insert's buckets (messages by slot index, by doc_id).

        Here none: each bucket's first write is its own (``_fill_or_create``). A store whose
        engine can write several buckets in one round trip overrides it, and returns what
        that write did to each bucket it tried; the state machine takes the others, and
        goes on from there with the ones not written.
        """
        return {}

    def insert_many(self, batches: Mapping[str, Sequence[Message]]) -> dict[str, InsertResult]:
        """Store several conversations' messages; see MessageStore.insert_many.

        One read finds which of their buckets exist; the missing ones are created together
        (``create_buckets``); the others, and any another writer created in between, go
        through the insert state machine bucket by bucket.
        """
        pending: dict[str, dict[int, Message]] = {}
        owner: dict[str, str] = {}
        for conversation_id, messages in batches.items():
            by_seq = {message.seq: message for message in messages}
            for doc_id, seqs in self.layout.group(conversation_id, by_seq).items():
                pending[doc_id] = {self.layout.slot_index(seq): by_seq[seq] for seq in seqs}
                owner[doc_id] = conversation_id
        existing = self.repository.read({d: sorted(slots)[:1] for d, slots in pending.items()})
        fresh = {
            doc_id: {index: Slot(message=m) for index, m in slots.items()}
            for doc_id, slots in pending.items()
            if doc_id not in existing
        }
        created = self.repository.create_buckets(fresh) if fresh else set()
        outcome: dict[str, dict[int, InsertOutcome]] = {conv: {} for conv in batches}
        for doc_id, slots in pending.items():
            found = outcome[owner[doc_id]]
            if doc_id in created:
                found.update((m.seq, InsertOutcome.INSERTED) for m in slots.values())
            else:
                self._insert_bucket(doc_id, slots, found)
        return {conv: InsertResult.of(ms, outcome[conv]) for conv, ms in batches.items()}

    def _insert_bucket(
        self,
        doc_id: str,
        pending: dict[int, Message],
        outcome: dict[int, InsertOutcome],
        done: FirstWrite | None = None,
    ) -> None:
        """The insert state machine for one bucket; done: its first write, if one was tried."""
        checked = False  # the last read found the bucket with every pending slot free
        write: Callable[[str, Mapping[int, Message]], bool] | None = self._fill_or_create
        if done is not None:  # a missed fill reads next; a refused create fills next
            write = None if done is FirstWrite.MISSED else self.repository.write_messages
        for _ in range(MAX_ROUNDS):
            if write is not None and write(doc_id, pending):
                outcome.update((m.seq, InsertOutcome.INSERTED) for m in pending.values())
                return
            write = self.repository.write_messages
            if checked:
                contention.record(contention.BUCKET_UPDATE_LOST)
            current = self.repository.read({doc_id: sorted(pending)}).get(doc_id)
            if current is None:
                fresh = {index: Slot(message=m) for index, m in pending.items()}
                if self.repository.create_bucket(doc_id, fresh):
                    outcome.update((m.seq, InsertOutcome.INSERTED) for m in pending.values())
                    return
                contention.record(contention.BUCKET_CREATE_LOST)
                checked = False
                continue  # another writer created the bucket: step back, retry as an update
            for index, slot in current.items():
                kind = classify(slot, pending[index])
                if kind is not None:
                    outcome[pending.pop(index).seq] = kind
            if not pending:
                return
            checked = True
        raise StoreUnavailable(f"insert into {doc_id} did not settle under contention")

    def _fill_or_create(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """An insert's first write into doc_id: here ``write_messages``.

        A store whose engine can also create a missing bucket in the same round trip
        overrides it to do both.
        """
        return self.repository.write_messages(doc_id, messages)

    def get(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> dict[int, Slot]:
        """Read slots holding anything, spilled deleters merged in; see MessageStore.get.

        With a viewer the repository answers "did the viewer delete it" itself and the side
        table is asked for the viewer's own entry only.
        """
        if viewer is not None:
            viewed = self._view(self._wanted(conversation_id, seqs), viewer)[0]
            return self.viewed(conversation_id, seqs, viewed, viewer)
        buckets = self._read(conversation_id, seqs)
        self._merge_spilled(buckets)
        return self._found(conversation_id, seqs, buckets)

    def viewed(
        self,
        conversation_id: str,
        seqs: Sequence[int],
        found: Mapping[str, Mapping[int, Slot | None]],
        viewer: str,
        spilled: SpilledBy | None = None,
    ) -> dict[int, Slot]:
        """The slots of seqs holding anything, as viewer sees them, from viewed buckets.

        found holds the slots as ``BucketRepository.read_viewed`` returns them, by doc_id
        (a missing bucket or slot reads as empty): the read of ``get`` or a fused pull read
        (``SqlBucketStore.view``, ``MongoBucketViews``). A slot flagged ``spilled`` whose
        inline deleters do not include viewer is settled by the side table: by spilled when
        the fused read brought the viewer's own entries of every flagged slot (by doc_id and
        slot index, as ``read_spilled`` returns them), else by one more round trip, only then.
        """
        buckets: dict[str, Slots] = {
            doc_id: {index: found.get(doc_id, {}).get(index) for index in indexes}
            for doc_id, indexes in self._wanted(conversation_id, seqs).items()
        }
        self._merge_spilled(buckets, viewer, spilled)
        return self._found(conversation_id, seqs, buckets)

    def viewed_seqs(
        self,
        conversation_id: str,
        seqs: Sequence[int],
        found: Mapping[int, Slot],
        viewer: str,
        spilled: SpilledBy | None = None,
    ) -> dict[int, Slot]:
        """``viewed`` for slots found by seq (a fused pull read's answer).

        The usual pull, with no slot flagged ``spilled``, needs nothing settled: its
        non-empty slots are the answer, with no regrouping by bucket.
        """
        if not any(slot.spilled for slot in found.values()):
            return {
                seq: slot
                for seq in seqs
                if (slot := found.get(seq)) is not None and not slot.is_empty
            }
        layout = self.layout
        by_doc: dict[str, dict[int, Slot | None]] = {}
        for seq, slot in found.items():
            doc_id = layout.doc_id(conversation_id, seq)
            by_doc.setdefault(doc_id, {})[layout.slot_index(seq)] = slot
        return self.viewed(conversation_id, seqs, by_doc, viewer, spilled)

    def _found(
        self, conversation_id: str, seqs: Sequence[int], buckets: dict[str, Slots]
    ) -> dict[int, Slot]:
        """The slots of seqs that hold anything, from their buckets."""
        found: dict[int, Slot] = {}
        for seq in seqs:
            slot = buckets[self.layout.doc_id(conversation_id, seq)][self.layout.slot_index(seq)]
            if slot is not None and not slot.is_empty:
                found[seq] = slot
        return found

    def get_many(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Read the buckets of several conversations at once; see MessageStore.get_many."""
        buckets = self._read_many(wanted)
        self._merge_spilled(buckets)
        found: dict[str, dict[int, Slot]] = {}
        for conversation_id, seqs in wanted.items():
            slots = found.setdefault(conversation_id, {})
            for seq in seqs:
                doc_id = self.layout.doc_id(conversation_id, seq)
                slot = buckets[doc_id][self.layout.slot_index(seq)]
                if slot is not None and not slot.is_empty:
                    slots[seq] = slot
        return found

    def batch(self) -> AbstractContextManager[None]:
        """Writes as usual (an engine with transactions overrides it); see MessageStore.batch."""
        return nullcontext()

    def revoke(self, conversation_id: str, seq: int, revoke: Revoke) -> bool:
        """Record a revoke; see MessageStore.revoke."""
        doc_id, index = self.layout.doc_id(conversation_id, seq), self.layout.slot_index(seq)
        for _ in range(MAX_ROUNDS):
            if self.repository.set_revoke(doc_id, index, revoke):
                return True
            bucket = self.repository.read({doc_id: [index]}).get(doc_id)
            if bucket is not None:
                if bucket[index].revoke is not None or bucket[index].purged:
                    return False
                # A concurrent writer created the bucket after set_revoke missed it: the
                # slot is still free, so the conditional write is tried again.
                continue
            if self.repository.create_bucket(doc_id, {index: Slot(revoke=revoke)}):
                return True
            contention.record(contention.BUCKET_CREATE_LOST)
        raise StoreUnavailable(f"revoke in {doc_id} did not settle under contention")

    def delete_for(
        self, conversation_id: str, seqs: Sequence[int], user_id: str, guard: Guard | None = None
    ) -> int:
        """Set-add user_id to deleted_by, inline or spilled; see MessageStore.delete_for.

        One read for all buckets, then one write for all of them (``_write_all``). A deleter
        spilling from a slot that this write flags rides on the bucket's patch
        (``BucketRepository.patch_many``: on SQL the same statement); the side table takes
        one more write for all buckets together only for slots flagged already (the bucket
        itself is then left alone) or written again after a refusal.
        """
        buckets, counts = self._view(self._wanted(conversation_id, seqs), user_id)
        self._guard(conversation_id, seqs, buckets, guard)

        def reread(wanted: dict[str, list[int]]) -> dict[str, Slots]:
            found, fresh = self._view(wanted, user_id)
            for doc_id, known in fresh.items():
                counts[doc_id].update(known)
            return found

        changed, spills = self._write_all(
            buckets, lambda doc_id: self._deleting(user_id, counts[doc_id]), reread, user_id
        )
        spilled: list[Spilled] = [(doc_id, index, user_id) for doc_id, index in spills]
        # After the flags: a reader that sees a flag reads the side table, never the reverse.
        return changed + (self.repository.add_spilled(spilled) if spilled else 0)

    def purge(self, conversation_id: str, seqs: Sequence[int], guard: Guard | None = None) -> int:
        """Physically delete, spilled deleters too; see MessageStore.purge.

        A purged slot never shows spilled deleters again, so a deleter spilled by a
        concurrent delete after the side table was cleaned stays invisible.
        """
        buckets = self._read(conversation_id, seqs)
        self._guard(conversation_id, seqs, buckets, guard)
        changed = self._write_all(buckets, lambda _: planned(purging), self._reread)[0]
        flagged = _flagged(buckets)
        if flagged:
            self.repository.drop_spilled(flagged)
        return changed

    def scan(self, after: str | None, limit: int) -> SlotPage:
        """Whole buckets in doc_id order, spilled deleters merged; see MessageStore.scan.

        The cursor is the last doc_id of the page: two round trips per page at most.
        """
        wanted = max(1, limit // self.layout.size)
        found = self.repository.scan_buckets(after, wanted)
        buckets: dict[str, Slots] = {doc_id: dict(enumerate(slots)) for doc_id, slots in found}
        self._merge_spilled(buckets)
        scanned: list[ScannedSlot] = []
        for doc_id, slots in buckets.items():
            conversation, index = doc_id.rsplit(":", 1)
            for slot_index, slot in slots.items():
                if slot is not None and not slot.is_empty:
                    seq = self.layout.seq_of(int(index), slot_index)
                    scanned.append(ScannedSlot(conversation, seq, slot))
        cursor = found[-1][0] if len(found) == wanted else None
        return SlotPage(tuple(scanned), cursor)

    def stats(self) -> StoreStats:
        """Footprint of the buckets and the side table."""
        return self.repository.stats()

    def close(self) -> None:
        """Release the repository."""
        self.repository.close()

    def _wanted(self, conversation_id: str, seqs: Sequence[int]) -> dict[str, list[int]]:
        """The slot indexes of seqs by doc_id."""
        return self._wanted_many({conversation_id: seqs})

    def _wanted_many(self, seqs_of: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
        """The slot indexes of several conversations' seqs by doc_id."""
        return {
            doc_id: [self.layout.slot_index(seq) for seq in group]
            for conversation_id, seqs in seqs_of.items()
            for doc_id, group in self.layout.group(conversation_id, seqs).items()
        }

    def _read(self, conversation_id: str, seqs: Sequence[int]) -> dict[str, Slots]:
        """The inline slots of seqs by bucket, in one round trip."""
        return self._read_many({conversation_id: seqs})

    def _read_many(self, seqs_of: Mapping[str, Sequence[int]]) -> dict[str, Slots]:
        """The inline slots of several conversations' seqs by bucket, in one round trip."""
        wanted = self._wanted_many(seqs_of)
        return by_bucket(wanted, self.repository.read(wanted) if wanted else {})

    def _view(
        self, wanted: dict[str, list[int]], viewer: str
    ) -> tuple[dict[str, Slots], dict[str, Counts]]:
        """The inline slots as viewer reads them and their inline deleter counts, one trip."""
        found = self.repository.read_viewed(wanted, viewer) if wanted else {}
        buckets: dict[str, Slots] = {}
        counts: dict[str, Counts] = {}
        for doc_id, indexes in wanted.items():
            bucket = found.get(doc_id)
            buckets[doc_id] = {i: None if bucket is None else bucket[i][0] for i in indexes}
            counts[doc_id] = {i: 0 if bucket is None else bucket[i][1] for i in indexes}
        return buckets, counts

    def _merge_spilled(
        self, buckets: dict[str, Slots], viewer: str | None = None, known: SpilledBy | None = None
    ) -> None:
        """Complete flagged slots with their side-table deleters (one more round trip).

        For a viewer, the side table is asked for the viewer's own entries only, unless
        known already holds them (for every flagged slot): then nothing is asked.
        """
        for slots in buckets.values():
            for index, slot in slots.items():
                if slot is not None and slot.purged and slot.spilled:
                    slots[index] = replace(slot, spilled=False)  # purged: nothing to show
        flagged = _flagged(buckets)
        asked = flagged
        if viewer is not None:  # a viewer found inline has the answer: no side-table lookup
            asked = {
                doc_id: unknown
                for doc_id, indexes in flagged.items()
                if (unknown := [i for i in indexes if viewer not in _deleters(buckets, doc_id, i)])
            }
        if known is not None and viewer is not None:
            found = known
        else:
            found = self.repository.read_spilled(asked, viewer) if asked else {}
        for doc_id, indexes in flagged.items():
            for index in indexes:
                slot = buckets[doc_id][index]
                assert slot is not None
                extra = found.get(doc_id, {}).get(index, set())
                deleted_by = slot.deleted_by | extra
                if viewer is not None:  # a flagged slot has deleters, inline or spilled
                    deleted_by = viewed_deleters(viewer, viewer in deleted_by, True)
                buckets[doc_id][index] = replace(slot, deleted_by=deleted_by, spilled=False)

    def _patch(
        self, conversation_id: str, seqs: Sequence[int], decide: Decision, guard: Guard | None
    ) -> int:
        """Read the slots once, then write every bucket's changes together (``_write_all``)."""
        return self._patch_read(
            self._read(conversation_id, seqs), conversation_id, seqs, decide, guard
        )

    def _patch_read(
        self,
        buckets: dict[str, Slots],
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
    ) -> int:
        """``_patch`` after its read (buckets: the slots of seqs, read by the caller)."""
        self._guard(conversation_id, seqs, buckets, guard)
        return self._write_all(buckets, lambda _: planned(decide), self._reread)[0]

    def _guard(
        self,
        conversation_id: str,
        seqs: Sequence[int],
        buckets: dict[str, Slots],
        guard: Guard | None,
    ) -> None:
        """Call guard with the seqs whose slot holds nothing (before any write)."""
        if guard is None:
            return
        layout = self.layout
        empty = [
            seq
            for seq in seqs
            if (slot := buckets[layout.doc_id(conversation_id, seq)][layout.slot_index(seq)])
            is None
            or slot.is_empty
        ]
        guard(empty)


def _deleters(buckets: dict[str, Slots], doc_id: str, index: int) -> frozenset[str]:
    slot = buckets[doc_id][index]
    return frozenset() if slot is None else slot.deleted_by


def _flagged(buckets: dict[str, Slots]) -> dict[str, list[int]]:
    """Slots flagged as having spilled deleters (purged ones never show them)."""
    flagged: dict[str, list[int]] = {}
    for doc_id, slots in buckets.items():
        for index, slot in slots.items():
            if slot is not None and slot.spilled and not slot.purged:
                flagged.setdefault(doc_id, []).append(index)
    return flagged
