"""The entry point of the histories tests' writer processes, with their test-only switches.

``write`` runs imbucket.testing.histories.write_from_process; before the first call it can

- stall the ``stall_at``-th send in a way of ``STALLS`` (after writing a marker file, so that
  the test knows when to SIGKILL it mid send): BEFORE_INSERT between the seq allocation and
  the insert, AFTER_INSERT once the insert committed, before the cache is invalidated;
- with break_invalidation, leave the cache uninvalidated by every write (Redis says it took
  each invalidation, and drops it), so that the checker must report the stale pulls that
  follow. An argument, not an environment variable: a fork server's children inherit the
  server's environment, not the test's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from imbucket.app import MessageService
from imbucket.domain.model import InsertResult, Message
from imbucket.testing.histories import Workload, write_from_process

BEFORE_INSERT, AFTER_INSERT = "before-insert", "after-insert"
STALLS = (BEFORE_INSERT, AFTER_INSERT)
STALL_SECONDS = 60.0  # longer than any test waits: the process is killed in it


def write(
    config: Mapping[str, Any],
    name: str,
    work: Workload,
    log_path: str,
    stall: str = "",
    stall_at: int = 0,
    break_invalidation: bool = False,
    bound: float = 0.0,
) -> None:
    """A writer process (multiprocessing's target): client name's calls, logged to log_path."""

    def prepare(service: MessageService) -> None:
        if break_invalidation:
            relayed: Any = service.store.cache  # type: ignore[attr-defined]
            redis_cache = relayed.cache
            redis_cache.invalidate = lambda *args, **kwargs: True
            redis_cache.invalidate_marks = lambda *args, **kwargs: True
        if stall:
            _stall_insert(service, stall, stall_at, Path(log_path + ".stalled"))

    write_from_process(config, name, work, log_path, bound=bound, prepare=prepare)


def _stall_insert(service: MessageService, stall: str, at: int, marker: Path) -> None:
    """Make the at-th insert of service's sends stall, before or after the store's insert."""
    cached: Any = service.store
    insert: Callable[[str, Sequence[Message]], InsertResult] = cached.insert
    bare: Callable[[str, Sequence[Message]], InsertResult] = cached.store.insert
    inserts = 0

    def stalling(conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        nonlocal inserts
        inserts += 1
        if inserts != at:
            return insert(conversation_id, messages)
        if stall == AFTER_INSERT:
            bare(conversation_id, messages)  # committed; the cache is never told
        marker.write_text(stall)
        time.sleep(STALL_SECONDS)
        raise AssertionError("the stalled writer was not killed")

    cached.insert = stalling


def stalled(log_path: str) -> bool:
    """Whether the writer logging to log_path is stalled in its send now."""
    return Path(log_path + ".stalled").exists()
