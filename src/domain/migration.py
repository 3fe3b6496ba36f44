"""Rules of copying one store into another.

Which target slots a copy may complete, and whether two stores show every viewer the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from imbucket.domain.model import Limits, Slot, Watermarks
from imbucket.domain.projection import Entry, project

ANONYMOUS = ""  # a viewer who is nobody in particular: sees what any non-deleter sees


def normalized(slot: Slot) -> Slot:
    """The slot as ``MessageStore.get`` shows it (spilled deleters merged, flag cleared)."""
    return replace(slot, spilled=False) if slot.spilled else slot


def reachable(target: Slot, source: Slot) -> bool:
    """Whether target can become source by the store's forward writes alone.

    Forward writes are: a message landing in a free slot, a revoke on an unrevoked slot,
    set-adds of deleters, early readers (only before the message lands) and is_read, and
    purge (from anything). A target slot that is not reachable holds data the source does
    not have: a migration reports it and never overwrites it.
    """
    if source.purged:
        return True
    if target.purged:
        return False
    if target.message is not None and target.message != source.message:
        return False
    if target.revoke is not None and target.revoke != source.revoke:
        return False
    if not target.deleted_by <= source.deleted_by or not target.read_by <= source.read_by:
        return False
    if target.is_read and not source.is_read:
        return False
    # Early readers can only be added while the slot has no message.
    return target.message is None or target.read_by == source.read_by


def sizes_need_checking(source: Limits, target: Limits) -> bool:
    """Whether a copy must size each message against the target's limits.

    Every message a store holds passed its own limits on the way in (``check_message``), and
    a stored message's size does not depend on ``max_id_length``: so when the source's
    ``max_message_bytes`` is no larger than the target's, none can be too large for the
    target. This trusts the source's configured limits; a source whose limits were lowered
    after it was written needs a target with its former ones.
    """
    return source.max_message_bytes > target.max_message_bytes


def viewers(slots: Iterable[Slot], users: Iterable[str] = ()) -> list[str]:
    """Everyone whose view of these slots may differ: users named by them, plus anonymous."""
    names = {ANONYMOUS, *users}
    for slot in slots:
        names |= slot.deleted_by | slot.read_by
        if slot.message is not None:
            names.add(slot.message.send_id)
        if slot.revoke is not None:
            names.add(slot.revoke.user_id)
    return sorted(names)


def same_views(seq: int, left: Slot | None, right: Slot | None, users: Iterable[str] = ()) -> bool:
    """Whether every viewer sees seq alike in both slots (watermarks set aside).

    Also compares the facts a view reveals only to some viewers later (a revoke's author, the
    early readers that make a message read once it lands), so equal views mean equal slots
    for every viewer present and future.
    """
    present = [slot for slot in (left, right) if slot is not None]
    marks = Watermarks(max_seq=seq)
    for viewer in viewers(present, users):
        if _view(viewer, seq, left, marks) != _view(viewer, seq, right, marks):
            return False
    return _facts(left) == _facts(right)


def _view(viewer: str, seq: int, slot: Slot | None, marks: Watermarks) -> Entry:
    return project(viewer, [seq], {} if slot is None else {seq: slot}, marks)[0]


def _facts(slot: Slot | None) -> tuple[object, ...]:
    """What a slot holds beyond today's views: its revoke, read state and pending tags."""
    if slot is None or normalized(slot).is_empty:
        return ("empty",)
    if slot.purged:
        return ("purged",)
    if slot.message is None:  # tags waiting for their message
        return ("pending", slot.revoke, slot.deleted_by, slot.read_by)
    return ("message", slot.revoke, slot.read)
