"""Bulk writes of a data collection that can carry more updates than their own.

A mark-read writes its tags and raises the reader's read seq. Both live in the data
collection (``commands.UserDocs``), so the raise rides on the tag write's own ``update``
command as one more statement, and a mark-read costs its read and that one command
(the two round trips every tag write is held to). When nothing is left to write (every seq
was marked already), the raise goes alone at the end.

A fresh send records its claims' seqs (``commands.claim_records``, claims live in the data
collection too) in the command that stores its messages: the records lead it, ordered, so
that a claim lost meanwhile stops the command before any message is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pymongo import UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from imbucket.adapters import asyncio_bridge
from imbucket.adapters.mongo.commands import Doc, Update
from imbucket.adapters.mongo.connection import translated
from imbucket.adapters.mongo.replies import duplicate_positions
from imbucket.domain.errors import ImbucketError


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What an unordered bulk write did to its own updates (the rider's left out)."""

    matched: int  # updates whose filter matched (an upsert that inserted did not)
    collided: list[int]  # positions of updates refused on a duplicate key
    upserted: list[int]  # positions of upserts that inserted their document


@dataclass(frozen=True, slots=True)
class OrderedOutcome:
    """What an ordered bulk write did: where a duplicate key stopped it, which inserted."""

    stopped_at: int | None  # the update refused on a duplicate key; none after it ran
    upserted: dict[int, Any]  # the _id each update that inserted gave its document


class ClaimTaken(Exception):
    """A claim record that led a write was refused: the claim is no longer its sender's.

    Nothing after it in the command ran: no message was written.
    """


class RidingWrites:
    """Unordered bulk writes of one collection, each carrying the waiting rider, if any.

    The rider is an upsert (``commands.raise_read_seq``) whose outcome no caller needs
    beyond its landing; it lands once, with the first write that carries it, else alone
    when ``carrying`` ends. It waits per caller (a thread, or an imbucket.aio call): callers
    sharing a store (threads, tasks) never carry, or overwrite, each other's.
    """

    def __init__(self, collection: Collection[Doc]) -> None:
        self._collection = collection
        self._waiting = asyncio_bridge.TaskLocal()
        self._guards = asyncio_bridge.TaskLocal()  # claim records to lead the next write
        self._unsettled = asyncio_bridge.TaskLocal()  # sent, but the command failed

    @property
    def _rider(self) -> Update | None:
        rider: Update | None = self._waiting.get()
        return rider

    @_rider.setter
    def _rider(self, rider: Update | None) -> None:
        self._waiting.set(rider)

    @contextmanager
    def carrying(self, rider: Update | None) -> Iterator[None]:
        """Let the block's first bulk write carry rider; send it alone if none did.

        When the block raises, a rider not yet sent is dropped (a refused mark-read raises
        nothing).
        """
        self._rider = rider
        try:
            yield
        finally:
            left, self._rider = self._rider, None
        if left is not None:
            self._alone(left)

    @contextmanager
    def leading(self, guards: Sequence[Update]) -> Iterator[None]:
        """Let the block's first bulk write be ordered and start with guards (claim records).

        A guard refused on a duplicate key raises ClaimTaken from that write, before any of
        its own updates ran. Guards no write carried (the block raised before writing), or
        carried by a command that failed, are written alone when the block ends, so the
        claims hold their seqs whatever the block did; a failure of that write is a note on
        the block's error.
        """
        self._guards.set(list(guards))
        self._unsettled.set(None)
        try:
            yield
        except BaseException as error:
            try:
                self._settle()
            except ImbucketError as failed:
                error.add_note(f"the claims' seqs were not recorded: {failed}")
            raise
        else:
            self._settle()

    def bulk_write(self, updates: Sequence[Update], action: str) -> BulkOutcome:
        """One unordered bulk write of updates, plus the rider: one round trip.

        A rider that collides on a duplicate key (a concurrent first upsert of the same
        user document) waits for the next write, or the end of ``carrying``. Under
        ``leading``, the first write is ordered instead, its guards first (``_led``).
        """
        guards: list[Update] = self._guards.get() or []
        if guards:
            self._guards.set(None)
            return self._led(guards, updates, action)
        rider, self._rider = self._rider, None
        operations = [UpdateOne(u.filter, u.update, upsert=u.upsert) for u in updates]
        if rider is not None:
            operations.append(UpdateOne(rider.filter, rider.update, upsert=True))
        with translated(action):
            try:
                result = self._collection.bulk_write(operations, ordered=False)
                details: Mapping[str, Any] = result.bulk_api_result
            except BulkWriteError as error:
                details = error.details
        collided = duplicate_positions(details)
        matched = int(details.get("nMatched", 0))
        last = len(updates)
        inserted = {int(u["index"]) for u in details.get("upserted", [])}
        if rider is not None:
            if last in collided:
                self._rider = rider
                collided.remove(last)
            elif last not in inserted:
                matched -= 1
        return BulkOutcome(matched, collided, sorted(i for i in inserted if i < last))

    def in_order(self, updates: Sequence[Update], action: str) -> OrderedOutcome:
        """One ordered bulk write of updates, without the rider: one round trip.

        An update refused on a duplicate key stops the command there (an update that
        guards those after it, ``commands.flagging_patch``); any other write error raises.
        """
        with translated(action):
            details = self._ordered(updates)
        collided = duplicate_positions(details)
        upserted = {int(u["index"]): u["_id"] for u in details.get("upserted", [])}
        return OrderedOutcome(collided[0] if collided else None, upserted)

    def _ordered(self, updates: Sequence[Update]) -> Mapping[str, Any]:
        """The result details of one ordered bulk write of updates, a refused one's too."""
        operations = [UpdateOne(u.filter, u.update, upsert=u.upsert) for u in updates]
        try:
            result: Mapping[str, Any] = self._collection.bulk_write(
                operations, ordered=True
            ).bulk_api_result
        except BulkWriteError as error:
            return error.details
        return result

    def _led(self, guards: list[Update], updates: Sequence[Update], action: str) -> BulkOutcome:
        """One ordered bulk write of guards, then updates; raises ClaimTaken if one is refused.

        A duplicate key among updates stops the command there: that update and the ones
        after it are reported as collided (the caller reads them, as any collision).
        """
        try:
            with translated(action):
                details = self._ordered([*guards, *updates])
                stopped = duplicate_positions(details)  # raises on other write errors
        except BaseException:
            self._unsettled.set(guards)  # landed or not: written again when leading ends
            raise
        lead = len(guards)
        if stopped and stopped[0] < lead:
            self._unsettled.set(guards[stopped[0] + 1 :])  # not run: recorded at the end
            raise ClaimTaken(f"a claim was taken over before {action}")
        upserted = sorted(int(u["index"]) for u in details.get("upserted", []))
        inserted = sum(1 for index in upserted if index < lead)
        matched = int(details.get("nMatched", 0)) - (lead - inserted)
        collided = list(range(stopped[0] - lead, len(updates))) if stopped else []
        return BulkOutcome(matched, collided, [i - lead for i in upserted if i >= lead])

    def _settle(self) -> None:
        """Write the guards no successful command carried, alone: one unordered bulk write.

        A duplicate key means the claim holds a seq already (this guard landed before) or
        was taken over: either way there is nothing left to record.
        """
        left = (self._guards.get() or []) + (self._unsettled.get() or [])
        self._guards.set(None)
        self._unsettled.set(None)
        if not left:
            return
        operations = [UpdateOne(u.filter, u.update, upsert=u.upsert) for u in left]
        with translated("record the claims' seqs"):
            try:
                self._collection.bulk_write(operations, ordered=False)
            except BulkWriteError as error:
                duplicate_positions(error.details)  # raises on other write errors

    @property
    def waiting(self) -> bool:
        """Whether a rider or guards wait for a write to carry them."""
        return self._rider is not None or bool(self._guards.get())

    def _alone(self, rider: Update) -> None:
        """The rider as a write of its own; a first upsert lost to another is tried again."""
        with translated("raise the read seq"):
            try:
                self._collection.update_one(rider.filter, rider.update, upsert=True)
            except DuplicateKeyError:
                self._collection.update_one(rider.filter, rider.update, upsert=True)
