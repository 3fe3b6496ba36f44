"""The BulkLoad ports: a store's own bulk path for data it does not hold yet (``imbucket migrate``).

A store that implements them lets a migration write whole units the target lacks — rows of
a row store, buckets of a bucket store, counter rows of a seq store — the way the engine
loads fastest (``COPY`` on PostgreSQL, multi-row ``INSERT`` on MariaDB, ``executemany`` on
SQLite), instead of through ``insert``'s state machine and the tag writes. Everything a
unit the store already holds anything of is left to the caller, which writes it through
the ordinary ports: so a bulk load never overwrites, merges or completes stored data, and
a rerun over what it loaded finds it held and writes nothing.

Between stores of one family the slots need not be built at all: a ``RowExport`` source
hands out its scan pages with the plain slots left in its own rows, and a ``RowLoad``
target that reads that form writes them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from imbucket.domain.model import Slot
from imbucket.domain.scan import Counters, RowPage, ScannedSlot


@runtime_checkable
class BulkLoad(Protocol):
    """A MessageStore's bulk path for slots whose storage unit holds nothing yet.

    ``load_new(slots)`` takes slots by conversation and seq as ``MessageStore.get`` returns
    them (spilled deleters merged, no empty slot; the caller has checked their messages
    against the store's limits). It writes those whose unit the store holds nothing of — a
    row store's ``(conversation_id, seq)`` (no message, tag or purge row), a bucket store's
    bucket (no bucket document) — and returns the seqs it wrote, by conversation. Each
    written slot then reads back through ``get`` exactly as given. A unit only partly
    present in ``slots`` is written with what is given (a bucket's other slots empty). A
    unit the store's bulk form cannot hold as given (a bucket whose deleters need the side
    table) is not written. Everything not returned is the caller's to write through the
    MessageStore.

    Inside ``MessageStore.batch()`` the load joins the batch's transaction, so a failure
    rolls it back with the rest and raises ``StoreUnavailable``; nothing is half-written
    on SQL. Concurrent writers to the same units are not expected (a migration target);
    one that raced it makes the load fail (``StoreUnavailable``), never overwrite.
    """

    def load_new(self, slots: Mapping[str, Mapping[int, Slot]]) -> dict[str, set[int]]:
        """Write the slots of units the store holds nothing of; returns the seqs written."""
        ...


@runtime_checkable
class BulkCounterLoad(Protocol):
    """A SeqStore's bulk path for the counters of conversations it has no counters for.

    ``load_new_counters(rows)`` writes max_seq and min_seq of each row whose conversation
    the store has no counter row for, and returns those conversation ids; each then reads
    back (``max_seq``, ``min_seq``) as given. Rows of conversations already present are the
    caller's to raise through the SeqStore. Inside ``SeqStore.batch()`` it joins the batch's
    transaction, as ``BulkLoad.load_new`` does.
    """

    def load_new_counters(self, rows: Sequence[Counters]) -> set[str]:
        """Write the counters of conversations the store has none for; returns their ids."""
        ...


@runtime_checkable
class RowExport(Protocol):
    """A MessageStore's scan with its plain slots left in the store's own rows.

    ``scan_rows(after, limit)`` walks what ``MessageStore.scan(after, limit)`` walks, with
    the same cursors: each page's rows decoded by ``slots_of``, and its slots, are that scan
    page's slots (``RowPage``); with align the pages may end earlier, and together they
    still hold every slot once, in key order. ``row_form`` names the form of the rows.
    """

    row_form: str

    def scan_rows(self, after: str | None, limit: int, align: int = 1) -> RowPage:
        """The scan page after the cursor after (None: the first), plain slots as rows.

        align > 1: a page that would end inside a run of align seqs of a conversation (the
        seqs of one target bucket: 1..align, align+1..2*align, …) ends before that run
        instead, when anything comes before it; its cursor then resumes at the run.
        """
        ...

    def slots_of(
        self, rows: Sequence[Sequence[Any]], skip: Mapping[str, set[int]] | None = None
    ) -> list[ScannedSlot]:
        """The slots of rows of a RowPage of this store, in their order, but those skip lists.

        skip: seqs by conversation whose rows are left out (already written elsewhere).
        """
        ...


@runtime_checkable
class RowLoad(Protocol):
    """``BulkLoad`` of another store's exported rows (``RowExport``), without decoding them.

    ``loads_rows(form)`` says whether the store reads rows of that form. ``load_new_rows(rows)``
    then does what ``BulkLoad.load_new`` does with the slots the rows decode to: it writes
    those whose unit the store holds nothing of and returns their seqs by conversation; the
    rest are the caller's. It joins a ``MessageStore.batch()`` as load_new does.
    """

    unit_seqs: int  # the seqs of one unit (a bucket's size, 1 for a row): scan_rows' align

    def loads_rows(self, form: str) -> bool:
        """Whether load_new_rows takes rows of form."""
        ...

    def load_new_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, set[int]]:
        """Write the rows' slots of units the store holds nothing of; returns the seqs written."""
        ...
