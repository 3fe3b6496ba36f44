"""CachedViews and InvalidatingSeqStore: a pull's watermarks and slots read through a cache.

``CachedViews`` is a ``ViewReads`` that asks a ``ViewCache`` first: a fully cached pull is one
cache lookup. A pull whose watermarks are not cached reads the store's own ``ViewReads``
(fused where the backend has one); a pull whose watermarks are cached but some slots not
reads just those slots from the store. What was read is put back under the lookup's fill
ticket. ``InvalidatingSeqStore`` decorates the seq store so every write that may move a
watermark drops the cached one after the store write, also when the write failed half-way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial

from imbucket.domain.model import Pick, Slot, TableStats, Watermarks
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs
from imbucket.ports.message_cache import ViewCache
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore
from imbucket.ports.view_reads import View, ViewReads


class CachedViews:
    """A ViewReads decorator: the cache's view first, the store's for what it misses."""

    def __init__(self, views: ViewReads, store: MessageStore, cache: ViewCache) -> None:
        self.views = views
        self.store = store
        self.cache = cache

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """One cache lookup; on a miss one store read (the view, or the missing slots)."""
        found = self.cache.get_view(conversation_id, viewer_id, pick)
        if found.marks is None:
            marks, slots = self.views.view(conversation_id, viewer_id, pick)
            self._fill(conversation_id, viewer_id, marks, slots, found.ticket)
            return marks, slots
        marks = found.marks
        wanted = pick.of(marks)  # the domain's rule decides, whatever the cache returned
        hits = {seq: found.slots[seq] for seq in wanted if seq in found.slots}
        misses = [seq for seq in wanted if seq not in hits]
        if not misses:
            return marks, hits
        loaded = self.store.get(conversation_id, misses, viewer_id)
        self._fill(conversation_id, viewer_id, None, loaded, found.ticket)
        return marks, {**hits, **loaded}

    def _fill(
        self,
        conversation_id: str,
        viewer_id: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object | None,
    ) -> None:
        """Put back what the store answered (never an empty slot), if the lookup allows."""
        if ticket is None:
            return
        fill = {seq: slot for seq, slot in slots.items() if not slot.is_empty}
        if marks is not None or fill:
            self.cache.put_view(conversation_id, viewer_id, marks, fill, ticket)


class InvalidatingSeqStore:
    """A SeqStore decorator that drops the cached watermarks after each write that moves one.

    ``allocate``, ``allocate_sends``, ``raise_max_seq`` and ``raise_min_seq`` drop the
    conversation's part (every viewer's), ``raise_user_min_seq`` the user's floor. A raise
    whose result is above the value asked for moved nothing and drops nothing; a write that
    raised drops too (part of it may have landed). Everything else goes to the seq store unchanged.
    """

    def __init__(self, seqs: SeqStore, cache: ViewCache) -> None:
        self.seqs = seqs
        self.cache = cache

    def allocate(self, conversation_id: str, n: int) -> int:
        """Allocate in the seq store, then drop the conversation's cached watermarks."""
        try:
            return self.seqs.allocate(conversation_id, n)
        finally:
            self.cache.invalidate_marks(conversation_id)

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise in the seq store, then drop the conversation's cached watermarks if moved."""
        write = partial(self.seqs.raise_max_seq, conversation_id, seq)
        return self._raise(conversation_id, None, seq, write)

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Raise in the seq store, then drop the conversation's cached watermarks if moved."""
        write = partial(self.seqs.raise_min_seq, conversation_id, seq)
        return self._raise(conversation_id, None, seq, write)

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise in the seq store, then drop the user's cached floor if moved."""
        write = partial(self.seqs.raise_user_min_seq, conversation_id, user_id, seq)
        return self._raise(conversation_id, user_id, seq, write)

    def batch(self) -> AbstractContextManager[None]:
        """No batching: each write must be committed before its watermarks are dropped."""
        return nullcontext()

    def _raise(
        self, conversation_id: str, user_id: str | None, seq: int, write: Callable[[], int]
    ) -> int:
        result: int | None = None
        try:
            result = write()
            return result
        finally:
            if result is None or result <= seq:  # None: the write raised
                self.cache.invalidate_marks(conversation_id, user_id)

    # Reads and writes that move no watermark: straight to the seq store.

    def max_seq(self, conversation_id: str) -> int:
        """The seq store's max_seq."""
        return self.seqs.max_seq(conversation_id)

    def min_seq(self, conversation_id: str) -> int:
        """The seq store's min_seq."""
        return self.seqs.min_seq(conversation_id)

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """The seq store's user floor."""
        return self.seqs.user_min_seq(conversation_id, user_id)

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """The seq store's read seq."""
        return self.seqs.read_seq(conversation_id, user_id)

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """The seq store's raise (read seqs are not part of the watermarks)."""
        return self.seqs.raise_read_seq(conversation_id, user_id, seq)

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """The seq store's watermarks (uncached: pulls read through CachedViews)."""
        return self.seqs.watermarks(conversation_id, user_id)

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """The seq store's sent seqs."""
        return self.seqs.sent_seqs(conversation_id, client_msg_ids, since)

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """The seq store's claims."""
        return self.seqs.claim_sends(conversation_id, claims, at, since)

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Allocate in the seq store, then drop the conversation's cached watermarks."""
        try:
            return self.seqs.allocate_sends(conversation_id, client_msg_ids, at, since)
        finally:
            self.cache.invalidate_marks(conversation_id)

    def prune_sends(self, before: int, limit: int) -> int:
        """The seq store's prune."""
        return self.seqs.prune_sends(before, limit)

    def send_claims(self) -> TableStats:
        """The seq store's claim footprint."""
        return self.seqs.send_claims()

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """The seq store's scan."""
        return self.seqs.scan_counters(after, limit)

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """The seq store's scan."""
        return self.seqs.scan_user_seqs(after, limit)

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """The seq store's scan."""
        return self.seqs.scan_sends(after, limit)

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """The seq store's counters."""
        return self.seqs.counters_of(conversation_ids)

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """The seq store's user seqs."""
        return self.seqs.user_seqs_of(keys)

    def close(self) -> None:
        """Close the seq store (the cache is closed by the store that shares it)."""
        self.seqs.close()
