"""What a store's streaming scan hands out: pages of slots and of seq-store rows.

A scan walks everything a store holds in the engine's own order, one bounded page at a
time; each page carries the cursor to pass for the next one (None once the scan is done).
Cursors are opaque strings: only the store that made one reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from imbucket.domain.model import Slot
from imbucket.domain.quick_constructors import quick_constructor

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ScannedSlot:
    """One slot holding anything (a message, a tag or a purge mark), where it lives."""

    conversation_id: str
    seq: int
    slot: Slot


# ScannedSlot(conversation_id, seq, slot) for scans that build one per stored slot.
scanned_slot: Callable[[str, int, Slot], ScannedSlot] = quick_constructor(ScannedSlot)


@dataclass(frozen=True, slots=True)
class SlotPage:
    """A page of a MessageStore scan; ``cursor`` is None when nothing follows."""

    slots: tuple[ScannedSlot, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class RowPage:
    """A scan page whose plain slots stay in the store's own rows (``ports.bulk_load``).

    ``rows`` hold one slot each, with no deleter and no early reader, in the form ``form``
    names: opaque to all but the stores that load that form. ``slots`` are the page's other
    slots. Decoded (``RowExport.slots_of``), the rows and the slots together are the slots
    ``MessageStore.scan`` holds from the page's first key up to ``cursor`` (None: the end).
    ``conversation_ids`` is every slot's conversation in key order and ``messages`` how many
    slots hold a message.
    """

    form: str
    rows: Sequence[Sequence[Any]]
    slots: tuple[ScannedSlot, ...]
    cursor: str | None
    conversation_ids: Sequence[str]
    messages: int


@dataclass(frozen=True, slots=True)
class Counters:
    """A conversation's max_seq and min_seq."""

    conversation_id: str
    max_seq: int
    min_seq: int


@dataclass(frozen=True, slots=True)
class UserSeqs:
    """A user's clear floor and read seq in one conversation, and their own ceiling."""

    conversation_id: str
    user_id: str
    min_seq: int
    read_seq: int
    # The seq after which the user sees nothing (left the group), 0 for none: OpenIM's
    # seq_user.max_seq. Only openim-mongo keeps one; migrate verify compares it.
    max_seq: int = 0


@dataclass(frozen=True, slots=True)
class SendClaim:
    """The seq ``send`` recorded for a client_msg_id, and when (epoch ms)."""

    conversation_id: str
    client_msg_id: str
    seq: int
    claimed_at: int = 0


@dataclass(frozen=True, slots=True)
class SeqPage(Generic[T]):
    """A page of a SeqStore scan; ``cursor`` is None when nothing follows."""

    rows: tuple[T, ...]
    cursor: str | None
