"""RelayedCache: a ViewCache whose undelivered invalidations reach every reader through the store.

A writer that cannot reach the cache (a mistyped port, a cut connection, a partition) would
otherwise leave other processes serving what it changed until the entries' TTL ends. So each
invalidation the cache could not deliver is appended to the store's ``InvalidationLog``
before the write returns, and every reader reads that log at most once per ``staleness``
seconds, delivers what it finds and removes what it delivered, before it serves anything
from the cache. A pull served from the cache therefore reflects every write acknowledged
more than ``staleness`` seconds before it started; between reads of the log a fully cached
pull stays one cache round trip, and the log costs each process one store read per interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from imbucket.domain.errors import ImbucketError
from imbucket.domain.invalidation import Invalidation, merged
from imbucket.domain.model import Pick, Slot, Watermarks
from imbucket.ports.invalidation_log import InvalidationLog, LoggedInvalidation
from imbucket.ports.message_cache import CacheRead, ViewCache, ViewRead

log = logging.getLogger(__name__)

# Entries read per round trip of a catch-up, and round trips per catch-up at most: a log
# longer than that is worked off over several catch-ups, the cache unused meanwhile.
PAGE = 1_000
PAGES = 10
# An entry older than the cache's TTL (plus this margin) can only name expired entries.
EXPIRY_MARGIN_SECONDS = 60.0


class RelayedCache:
    """A ViewCache decorator: invalidations the cache refused go through the store's log.

    ``cache.invalidate`` and ``cache.invalidate_marks`` must return whether the cache took
    the invalidation now (False: it could not be reached, or is not confirmed for this
    store). ``monotonic`` times the staleness interval, ``wall`` stamps log entries.
    """

    def __init__(
        self,
        cache: ViewCache,
        log_of_store: InvalidationLog,
        *,
        staleness: float,
        ttl_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.log = log_of_store
        self.staleness = staleness
        self._expiry = ttl_seconds + EXPIRY_MARGIN_SECONDS
        self._monotonic = monotonic
        self._wall = wall
        self._caught_up_at = float("-inf")  # start of the last complete catch-up
        self._catch_up_lock = threading.Lock()
        self._unlogged: list[Invalidation] = []  # refused by the cache and by the log
        self._unlogged_lock = threading.Lock()

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        """The cache's lookup once the log is caught up; a miss-only read until then."""
        if not self._caught_up():
            return CacheRead()
        return self.cache.get_many(conversation_id, seqs, viewer)

    def get_view(self, conversation_id: str, viewer: str, pick: Pick) -> ViewRead:
        """The cache's view once the log is caught up; a miss until then."""
        if not self._caught_up():
            return ViewRead()
        return self.cache.get_view(conversation_id, viewer, pick)

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        """The cache's fill, unchanged."""
        self.cache.put_many(conversation_id, slots, ticket, viewer)

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        """The cache's fill, unchanged."""
        self.cache.put_view(conversation_id, viewer, marks, slots, ticket)

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> bool:
        """Invalidate in the cache, or else log it in the store before returning.

        Returns whether the cache took it now. Raises StoreUnavailable when neither the
        cache nor the log could take it (the caller's write is then not acknowledged; this
        process logs it on its next cache call that reaches the store).
        """
        if self.cache.invalidate(conversation_id, seqs):
            return True
        self._record(Invalidation(conversation_id, seqs=tuple(seqs)))
        return False

    def invalidate_marks(self, conversation_id: str, user_id: str | None = None) -> bool:
        """As ``invalidate``, for the conversation's watermarks or a user's floor."""
        if self.cache.invalidate_marks(conversation_id, user_id):
            return True
        if user_id is None:
            self._record(Invalidation(conversation_id, watermarks=True))
        else:
            self._record(Invalidation(conversation_id, floors=(user_id,)))
        return False

    def close(self) -> None:
        """Close the cache (the log belongs to the store)."""
        self.cache.close()

    def _record(self, invalidation: Invalidation) -> None:
        with self._unlogged_lock:
            self._unlogged.append(invalidation)
        self._log_unlogged()

    def _log_unlogged(self) -> None:
        """Append what no log holds yet; raises StoreUnavailable, keeping it, on failure."""
        with self._unlogged_lock:
            while self._unlogged:
                self.log.append(self._unlogged[0], self._wall())
                self._unlogged.pop(0)

    def _caught_up(self) -> bool:
        """Whether the log was read and delivered less than ``staleness`` seconds ago.

        Reads it now when due. While another thread does, or when the store or the cache
        cannot be reached for it, the cache is not served (the caller reads the store).
        """
        if self._monotonic() - self._caught_up_at < self.staleness:
            return True
        if not self._catch_up_lock.acquire(blocking=False):
            return False
        try:
            started = self._monotonic()
            if started - self._caught_up_at < self.staleness:
                return True
            if not self._catch_up():
                return False
            self._caught_up_at = started
            return True
        except ImbucketError as error:
            log.warning("cache invalidation log unreadable (%s); reading the store", error)
            return False
        finally:
            self._catch_up_lock.release()

    def _catch_up(self) -> bool:
        """Log this process's unlogged entries, then deliver and remove every logged one."""
        self._log_unlogged()
        for _ in range(PAGES):
            page = self.log.read(PAGE)
            delivered = self._deliver(page)
            if delivered:
                self.log.remove(delivered)
            if len(page) < PAGE:
                return len(delivered) == len(page)
            if len(delivered) < len(page):
                return False  # undelivered entries head the log: come back next interval
        return False

    def _deliver(self, page: list[LoggedInvalidation]) -> list[object]:
        """Deliver the page to the cache, one call per conversation; the keys delivered.

        A conversation the cache could not take stays pending in the cache, which reads the
        store for it until it is delivered, and stays in the log for the other readers.
        """
        expired = self._wall() - self._expiry
        keys: dict[str, list[object]] = {}
        live: list[Invalidation] = []
        done: list[object] = []
        for entry in page:
            if entry.written_at < expired:
                done.append(entry.key)
                continue
            keys.setdefault(entry.invalidation.conversation_id, []).append(entry.key)
            live.append(entry.invalidation)
        for invalidation in merged(live):
            if self._delivered(invalidation):
                done.extend(keys[invalidation.conversation_id])
        return done

    def _delivered(self, invalidation: Invalidation) -> bool:
        conversation_id = invalidation.conversation_id
        ok = True
        if invalidation.seqs:
            ok = self.cache.invalidate(conversation_id, invalidation.seqs) and ok
        if invalidation.watermarks:
            ok = self.cache.invalidate_marks(conversation_id) and ok
        for user in invalidation.floors:
            ok = self.cache.invalidate_marks(conversation_id, user) and ok
        return ok
