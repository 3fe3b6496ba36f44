"""Counters of the work other writers cause: lost conditional writes, lost races, retries.

The stores call ``record`` where they step back and try again because another writer got
there first (a bucket-creation race lost, a conditional update that found its slots taken, an
upsert that collided) and where an engine asked for a statement to be repeated (a deadlock,
a serialization failure, a lock timeout, SQLite's "database is locked"). Nothing here changes
what a store does: the counts are process-wide, cheap, and only read by whoever wants them
(the benchmark's contention workloads take a ``snapshot`` before and after a run).
"""

from __future__ import annotations

import threading
from collections import Counter

BUCKET_CREATE_LOST = "bucket_create_lost"
"""create_bucket found the bucket created by another writer; the write steps back."""
BUCKET_UPDATE_LOST = "bucket_update_lost"
"""A conditional bucket update wrote nothing although the last read said it would."""
ROW_UPSERT_LOST = "row_upsert_lost"
"""Two first upserts of one row collided; the loser reads and tries again."""
SQL_RETRY = "sql_retry"
"""The SQL engine undid a statement (deadlock, serialization failure, lock timeout, locked)."""

KINDS = (BUCKET_CREATE_LOST, BUCKET_UPDATE_LOST, ROW_UPSERT_LOST, SQL_RETRY)

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def record(kind: str, n: int = 1) -> None:
    """Count n events of kind (one of KINDS) in this process."""
    with _lock:
        _counts[kind] += n


def snapshot() -> dict[str, int]:
    """The counts so far in this process, every kind present (zero when none)."""
    with _lock:
        return {kind: _counts[kind] for kind in KINDS}


def since(before: dict[str, int]) -> dict[str, int]:
    """What was counted since the snapshot ``before``."""
    now = snapshot()
    return {kind: now[kind] - before.get(kind, 0) for kind in KINDS}
