"""The BulkLoad ports: a store's own bulk path for data it does not hold yet (``imbucket migrate``).

A store that implements them lets a migration write whole units the target lacks — rows of
a row store, buckets of a bucket store, counter rows of a seq store — the way the engine
loads fastest (``COPY`` on PostgreSQL, multi-row ``INSERT`` on MariaDB, ``executemany`` on
SQLite), instead of through ``insert``'s state machine and the tag writes. Everything a
unit the store already holds anything of is left to the caller, which writes it through
the ordinary ports: so a bulk load never overwrites, merges or completes stored data, and
a rerun over what it loaded finds it held and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.model import Slot
from imbucket.domain.scan import Counters


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
