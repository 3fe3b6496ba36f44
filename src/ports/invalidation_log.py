"""InvalidationLog: cache invalidations a writer could not deliver, kept with the store's data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from imbucket.domain.invalidation import Invalidation


@dataclass(frozen=True, slots=True)
class LoggedInvalidation:
    """One entry of the log: its key (opaque, for ``remove``), when it was written, what."""

    key: object
    written_at: float
    invalidation: Invalidation


class InvalidationLog(Protocol):
    """A small shared log, in the same database as the store, of undelivered invalidations.

    Every service that opens the store sees the same entries. A writer appends an entry when
    the cache could not be told about its write; each cached reader reads the log at most once
    per staleness interval, delivers what it finds to the cache and removes what it
    delivered. Entries are independent: delivering one twice, or in any order, is harmless.
    Each method is one round trip (or one statement) and raises StoreUnavailable when the
    store cannot be reached; nothing else.
    """

    def append(self, invalidation: Invalidation, written_at: float) -> None:
        """Add one entry; written_at is the writer's wall-clock time in epoch seconds."""
        ...

    def read(self, limit: int) -> list[LoggedInvalidation]:
        """The oldest entries, at most limit; an empty list when the log is empty."""
        ...

    def remove(self, keys: Sequence[object]) -> None:
        """Delete the entries of keys (keys already gone are ignored)."""
        ...
