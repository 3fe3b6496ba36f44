"""Bulk writes of a data collection that can carry one more upsert: a mark-read's raise.

A mark-read writes its tags and raises the reader's read seq. Both live in the data
collection (``commands.UserDocs``), so the raise rides on the tag write's own ``update``
command as one more statement, and a mark-read costs its read and that one command
(the two round trips every tag write is held to). When nothing is left to write (every seq
was marked already), the raise goes alone at the end.
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


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """What an unordered bulk write did to its own updates (the rider's left out)."""

    matched: int  # updates whose filter matched (an upsert that inserted did not)
    collided: list[int]  # positions of updates refused on a duplicate key


@dataclass(frozen=True, slots=True)
class OrderedOutcome:
    """What an ordered bulk write did: where a duplicate key stopped it, which inserted."""

    stopped_at: int | None  # the update refused on a duplicate key; none after it ran
    upserted: dict[int, Any]  # the _id each update that inserted gave its document


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

    def bulk_write(self, updates: Sequence[Update], action: str) -> BulkOutcome:
        """One unordered bulk write of updates, plus the rider: one round trip.

        A rider that collides on a duplicate key (a concurrent first upsert of the same
        user document) waits for the next write, or the end of ``carrying``.
        """
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
        if rider is not None:
            last = len(updates)
            inserted = {int(u["index"]) for u in details.get("upserted", [])}
            if last in collided:
                self._rider = rider
                collided.remove(last)
            elif last not in inserted:
                matched -= 1
        return BulkOutcome(matched, collided)

    def in_order(self, updates: Sequence[Update], action: str) -> OrderedOutcome:
        """One ordered bulk write of updates, without the rider: one round trip.

        An update refused on a duplicate key stops the command there (an update that
        guards those after it, ``commands.flagging_patch``); any other write error raises.
        """
        operations = [UpdateOne(u.filter, u.update, upsert=u.upsert) for u in updates]
        with translated(action):
            try:
                details: Mapping[str, Any] = self._collection.bulk_write(
                    operations, ordered=True
                ).bulk_api_result
            except BulkWriteError as error:
                details = error.details
        collided = duplicate_positions(details)
        upserted = {int(u["index"]): u["_id"] for u in details.get("upserted", [])}
        return OrderedOutcome(collided[0] if collided else None, upserted)

    @property
    def waiting(self) -> bool:
        """Whether a rider waits for a write to carry it."""
        return self._rider is not None

    def _alone(self, rider: Update) -> None:
        """The rider as a write of its own; a first upsert lost to another is tried again."""
        with translated("raise the read seq"):
            try:
                self._collection.update_one(rider.filter, rider.update, upsert=True)
            except DuplicateKeyError:
                self._collection.update_one(rider.filter, rider.update, upsert=True)
