"""BucketRepository on OpenIM's ``msg`` collection: ``{doc_id, msgs: [size slots]}``.

Every method is one driver call built by ``imbucket.adapters.mongo.commands``; the state machine
that combines them is ``adapters.bucket.BucketMessageStore``, shared with every bucket backend.
Every call addresses buckets by doc_id, the shard key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pymongo.errors import BulkWriteError

from imbucket.adapters.bucket import BucketMessageStore, FirstWrite
from imbucket.adapters.bucket_patches import by_bucket
from imbucket.adapters.codec import slot_from_doc
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.mongo.mark_read_writes import RidingWrites
from imbucket.adapters.mongo.msg_collection import MsgCollection
from imbucket.adapters.mongo.read_marks import raise_needed
from imbucket.adapters.mongo.replies import (
    ReaderMarks,
    bucket_slots,
    duplicate_positions,
    marked_reply,
    spilled_users,
    viewed_slots,
)
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Message, Revoke, Slot, SlotPatch
from imbucket.domain.tags import (
    Guard,
    checked_beyond,
    marking_read,
)
from imbucket.ports.bucket_repository import Spilled, Viewed

# Filled slots one create_buckets command carries at most.
_CREATE_SLOTS = 200


class MongoBucketRepository(MsgCollection):
    """Buckets in collection ``msg`` with a unique index on doc_id and none inside the array.

    Spilled deleters are documents of ``msg`` too, one each, ``doc_id`` =
    ``commands.spill_key(doc_id, slot, user_id)``: unique by the same index, beside their
    bucket, and written by the same command as the patch that flags their slot.
    """

    decode_slot = staticmethod(slot_from_doc)

    def __init__(self, connection: MongoConnection, layout: BucketLayout) -> None:
        self.layout = layout
        self._connection = connection
        self._buckets = connection.collection(commands.BUCKETS)
        self.riding = RidingWrites(self._buckets)
        self.users = commands.UserDocs(commands.BUCKETS)
        connection.ensure_indexes(commands.BUCKETS)
        connection.ensure_layout(commands.BUCKETS, layout)

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """``$set msgs.<i>.msg`` for every slot, matching only if all of them are free."""
        if not messages:
            return self._exists(doc_id)
        return self._update(commands.write_messages(doc_id, messages), "write messages")

    def fill_or_open(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        """The first writes of an insert (messages by slot index, by doc_id), in one command.

        The first bucket is filled (``write_messages``), and each bucket whose slot 0 is
        pending, most likely a new one, is opened (``commands.open_bucket``): created
        holding its messages unless it is there. The command holds one fill, so the reply
        says whether it landed: it matched beyond the opens that found their bucket. Opens
        beyond _CREATE_SLOTS messages, and buckets neither filled nor opened, are left out;
        everything is when no bucket is opened. One ordered command when it leads with
        claim records (``RidingWrites.leading``): a duplicate key stops it there, and the
        opens not run are reported as refused, as if their bucket was there.
        """
        first = next(iter(buckets))
        opening: list[str] = []
        carried = len(buckets[first])
        for doc_id, messages in buckets.items():
            if 0 in messages and carried + len(messages) <= _CREATE_SLOTS:
                opening.append(doc_id)
                carried += len(messages)
        if not opening:
            return {}
        size = self.layout.size
        updates = [commands.write_messages(first, buckets[first])]
        for doc_id in opening:
            slots = {index: Slot(message=m) for index, m in buckets[doc_id].items()}
            updates.append(commands.open_bucket(doc_id, slots, size))
        outcome = self.riding.bulk_write(updates, "write messages")
        done: dict[str, FirstWrite] = {}
        found = 0  # the opens that matched a bucket there already
        for position, doc_id in enumerate(opening, 1):
            if position in outcome.upserted:
                done[doc_id] = FirstWrite.WRITTEN
            else:
                done[doc_id] = FirstWrite.EXISTS
                found += position not in outcome.collided
        if 0 not in outcome.collided and outcome.matched > found:
            done[first] = FirstWrite.WRITTEN
        elif done.get(first) is not FirstWrite.WRITTEN:
            done[first] = FirstWrite.MISSED
        return done

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """insert_one of the whole bucket; a duplicate doc_id means another writer won."""
        return self._insert_bucket(commands.new_bucket(doc_id, slots, self.layout.size))

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """Unordered insert_many of at most _CREATE_SLOTS filled slots each.

        A duplicate doc_id means that bucket existed. Bounding each command keeps its reply
        within the statement timeout whatever the page size.
        """
        created: set[str] = set()
        chunk: list[str] = []
        filled = 0
        for doc_id, slots in buckets.items():
            if chunk and filled + len(slots) > _CREATE_SLOTS:
                created |= self._create(chunk, buckets)
                chunk, filled = [], 0
            chunk.append(doc_id)
            filled += len(slots)
        return created | (self._create(chunk, buckets) if chunk else set())

    def _create(self, doc_ids: list[str], buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        documents = [commands.new_bucket(d, buckets[d], self.layout.size) for d in doc_ids]
        return self._insert_buckets(doc_ids, documents)

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """One aggregate over all wanted buckets, projecting only the wanted slots."""
        if not wanted:
            return {}
        with translated("read buckets"):
            found = list(self._buckets.aggregate(commands.read_buckets(wanted)))
        return bucket_slots(wanted, found)

    def read_marked(
        self, wanted: Mapping[str, Sequence[int]], conversation_id: str, reader_id: str
    ) -> tuple[dict[str, dict[int, Slot]], ReaderMarks]:
        """``read`` of one conversation's buckets with max_seq and reader_id's read seq.

        One aggregate; see ``imbucket.adapters.mongo.read_marks``.
        """
        pipeline = commands.marked_buckets(conversation_id, reader_id, wanted)
        with translated("read buckets"):
            found = list(self._buckets.aggregate(pipeline, batchSize=len(wanted) + 2))
        marks, buckets = marked_reply(found, "doc_id")
        return bucket_slots(wanted, buckets), marks

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """``read`` with ``$in`` and ``$size`` inside the ``$map``: no deleter list travels."""
        if not wanted:
            return {}
        with translated("read buckets"):
            found = list(self._buckets.aggregate(commands.read_buckets(wanted, viewer)))
        return viewed_slots(wanted, found)

    def set_revoke(self, doc_id: str, slot: int, revoke: Revoke) -> bool:
        """``$set msgs.<i>.revoke`` iff the slot is neither revoked nor purged."""
        return self._update(commands.set_revoke(doc_id, slot, revoke), "revoke")

    def patch(
        self, doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
    ) -> bool:
        """One update_one with ``$addToSet`` / ``$set`` for all slots, filtered by the budget.

        Purged slots are spared: when the update does not match, one read tells a missing
        bucket or a refused budget (False) from purged target slots, which are dropped
        before the update is tried again.
        """
        return self._patch_sparing_purged(
            doc_id,
            patches,
            lambda some: self._update(commands.patch_bucket(doc_id, some, budget), "write tags"),
        )

    def patch_many(
        self,
        patches: Mapping[str, Mapping[int, SlotPatch]],
        budget: TagBudget | None = None,
        spills: Sequence[Spilled] = (),
    ) -> set[str] | None:
        """One unordered bulk_write of every bucket's ``patch`` update (one round trip).

        The reply counts the buckets matched, not which: short of all of them, the outcome
        is None and the state machine reads the buckets again (a purged target slot, which
        ``patch`` would drop, or a refused budget).

        With spills, the buckets are patched one by one, so that each outcome is known, and
        each patch carries its bucket's entries (``_patch_spilling``).
        """
        if spills:
            riding: dict[str, list[Spilled]] = {}
            for entry in spills:
                riding.setdefault(entry[0], []).append(entry)
            return {
                doc_id
                for doc_id, slots in patches.items()
                if self._patch_spilling(doc_id, slots, budget, riding.get(doc_id, []))
            }
        if len(patches) == 1:
            [(doc_id, only)] = patches.items()
            return {doc_id} if self.patch(doc_id, only, budget) else set()
        updates = [commands.patch_bucket(d, p, budget) for d, p in patches.items()]
        outcome = self.riding.bulk_write(updates, "write tags")
        return set(patches) if outcome.matched == len(patches) else None

    def _patch_spilling(
        self,
        doc_id: str,
        slots: Mapping[int, SlotPatch],
        budget: TagBudget | None,
        entries: Sequence[Spilled],
    ) -> bool:
        """``patch`` of one bucket and, iff it is written, the spilled deleters riding on it.

        One ordered update command where the patch can guard (``commands.flagging_patch``):
        the patch, then the entries, which run only if the patch was not refused. Else, and
        after a refusal, ``patch`` (which reads and retries) and then ``add_spilled``.
        """
        guard = commands.flagging_patch(doc_id, slots, budget)
        if guard is not None and entries:
            updates = [guard, *commands.spill_upserts(entries)]
            outcome = self.riding.in_order(updates, "write tags and spill deleters")
            if 0 in outcome.upserted:  # no such bucket: undo the document the guard made
                with translated("undo a write to a missing bucket"):
                    self._buckets.delete_many({"_id": {"$in": list(outcome.upserted.values())}})
                return False
            if outcome.stopped_at is None:
                return True
            if outcome.stopped_at > 0:  # entry stopped_at - 1 was there already (a set-add)
                self.add_spilled(entries[outcome.stopped_at :])
                return True
        written = self.patch(doc_id, slots, budget)
        if written and entries:
            self.add_spilled(entries)
        return written

    def add_spilled(self, entries: Sequence[Spilled]) -> int:
        """insert_many(ordered=False); the duplicate doc_ids reported were there already."""
        command = commands.spill_documents(entries)
        with translated("spill deleters"):
            try:
                self._buckets.insert_many(command.documents, ordered=command.ordered)
            except BulkWriteError as error:
                return len(entries) - len(duplicate_positions(error.details))
        return len(entries)

    def read_spilled(
        self, wanted: Mapping[str, Sequence[int]], viewer: str | None = None
    ) -> dict[str, dict[int, set[str]]]:
        """One find of spilled deleters by doc_id (the viewer's entries only when given)."""
        where = (
            commands.spilled_in(wanted) if viewer is None else commands.spilled_by(wanted, viewer)
        )
        with translated("read spilled deleters"):
            found = list(self._buckets.find(where, commands.SPILLED_FIELDS))
        return spilled_users(found)

    def drop_spilled(self, wanted: Mapping[str, Sequence[int]]) -> None:
        """One delete_many of the slots' spilled deleters, by doc_id range."""
        with translated("drop spilled deleters"):
            self._buckets.delete_many(commands.spilled_in(wanted))

    def _update(self, command: commands.Update, action: str) -> bool:
        """update_one; True iff the filter matched (the bucket exists, the condition held).

        A waiting rider (``riding``) makes it a bulk write of the two.
        """
        if self.riding.waiting:
            return self.riding.bulk_write([command], action).matched == 1
        with translated(action):
            result = self._buckets.update_one(command.filter, command.update)
        return result.matched_count == 1


class MongoBucketStore(BucketMessageStore):
    """The bucket state machine's MessageStore over a MongoBucketRepository."""

    repository: MongoBucketRepository

    def __init__(self, repository: MongoBucketRepository, budget: TagBudget | None = None) -> None:
        super().__init__(repository, budget)

    def _first_writes(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        """The first fill and the creates of new buckets in one command (``fill_or_open``)."""
        return self.repository.fill_or_open(buckets)

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """See ``MarkingStore.mark_read_raising``."""
        wanted = self._wanted(conversation_id, seqs)
        found, marks = self.repository.read_marked(wanted, conversation_id, reader_id)
        buckets = by_bucket(wanted, found)
        checked = checked_beyond(guard, marks.max_seq)
        rider = raise_needed(self.repository.users, conversation_id, reader_id, seqs, marks)
        with self.repository.riding.carrying(rider):
            return self._patch_read(
                buckets, conversation_id, seqs, marking_read(reader_id), checked
            )
