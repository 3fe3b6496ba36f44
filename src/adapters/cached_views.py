"""CachedViews and InvalidatingSeqStore: a pull's watermarks and slots read through a cache.

``CachedViews`` is a ``ViewReads`` that asks a ``ViewCache`` first: a fully cached pull is one
cache lookup. A pull whose watermarks are not cached reads the store's own ``ViewReads``
(fused where the backend has one); a pull whose watermarks are cached but some slots not
reads just those slots from the store. What was read is put back under the lookup's fill
ticket. ``InvalidatingSeqStore`` decorates the seq store so every write that may move a
watermark drops the cached one after the store write, also when the write failed half-way;
``InvalidatingFreshSends`` does the same for a backend's one-step send, and
``InvalidatingReadMarks`` invalidates the slots a backend's fused mark-read changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial

from imbucket.domain.model import InsertResult, Message, Pick, Slot, TableStats, Watermarks
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs
from imbucket.domain.tags import Guard
from imbucket.ports.fresh_sends import FreshSends, StoringFreshSends
from imbucket.ports.message_cache import ViewCache
from imbucket.ports.message_store import MessageStore
from imbucket.ports.read_marks import ReadMarks
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


class InvalidatingFreshSends:
    """A FreshSends decorator: the step, then the conversation's cached watermarks dropped.

    The step moves max_seq, so it drops what ``InvalidatingSeqStore.allocate_sends`` drops,
    when the step has returned: after its commit, since a reader that refilled the old
    max_seq between a drop inside the transaction and the commit would keep serving it. It
    drops also when the step raised (part of it may have landed) or found a claim (the
    general path that follows drops again when it allocates).
    """

    def __init__(self, fresh: FreshSends, cache: ViewCache) -> None:
        self.fresh = fresh
        self.cache = cache

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        """Claim and allocate in the backend's step, then drop the cached watermarks."""
        try:
            return self.fresh.claim_fresh(conversation_id, client_msg_ids, at, since)
        finally:
            self.cache.invalidate_marks(conversation_id)


class InvalidatingStoringFreshSends(InvalidatingFreshSends):
    """``InvalidatingFreshSends`` of a backend whose step also stores the messages.

    insert is the service's, through ``CachedMessageStore.insert``: where the engine joins it
    to the step's transaction (SQLite, MariaDB) it invalidates the new seqs before the
    commit. That is harmless: those seqs held nothing before the step (a seq holding
    something undoes the step), a cache never keeps an empty slot, and a reader that read
    them before the commit found them empty, so it cached nothing of them; an invalidation
    the cache refused and logged in the store's invalidation log is rolled back only with
    the insert it names. It does hold the step's locks over one cache round trip (while the
    cache does not answer, over its timeout, until the cache is skipped). The watermarks,
    which such a reader may have refilled, are dropped after the commit.
    """

    def __init__(self, fresh: StoringFreshSends, cache: ViewCache) -> None:
        super().__init__(fresh, cache)
        self.storing = fresh

    def store_fresh(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        at: int,
        insert: Callable[[str, list[Message]], InsertResult],
        store_insert: Callable[[str, list[Message]], InsertResult] | None = None,
        since: int = 0,
    ) -> int | None:
        """Claim, allocate and store in the backend's step, then drop the cached watermarks.

        Also when it returned None: on PostgreSQL the claims and seqs are committed before
        an insert that did not store every message. store_insert is passed on: the cached
        store's insert, which invalidates, is never the backend's own, so the backend
        stores through insert.
        """
        try:
            return self.storing.store_fresh(
                conversation_id, messages, at, insert, store_insert=store_insert, since=since
            )
        finally:
            self.cache.invalidate_marks(conversation_id)


def invalidating_fresh_sends(fresh: FreshSends, cache: ViewCache) -> FreshSends:
    """The backend's one-step send behind cache; ``store_fresh`` only where it has one."""
    if isinstance(fresh, StoringFreshSends):
        return InvalidatingStoringFreshSends(fresh, cache)
    return InvalidatingFreshSends(fresh, cache)


class InvalidatingReadMarks:
    """A ReadMarks decorator: the backend's fused mark-read, then the changed seqs invalidated.

    It invalidates what ``CachedMessageStore.mark_read`` invalidates around the store's
    mark-read: seqs, unless the write reported no change, also when it raised. The read seq
    it raises is not part of the cached watermarks, so no watermark is dropped.
    """

    def __init__(self, marks: ReadMarks, cache: ViewCache) -> None:
        self.marks = marks
        self.cache = cache

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """The backend's mark-read, then seqs invalidated if any changed."""
        changed: int | None = None
        try:
            changed = self.marks.mark_read(conversation_id, seqs, reader_id, guard)
            return changed
        finally:
            unique = list(dict.fromkeys(seqs))
            if unique and (changed is None or changed):  # None: the write raised
                self.cache.invalidate(conversation_id, unique)
