"""MessageService: the use cases, on top of a MessageStore and a SeqStore."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ParamSpec, TypeVar

from imbucket.app.read_marks import SeparateReadMarks
from imbucket.app.views import pull_reads
from imbucket.domain import policy, sending
from imbucket.domain.errors import (
    ImbucketError,
    InvalidArgument,
    InvalidMessage,
    SeqNotAllocated,
    StoreUnavailable,
    WriteRefused,
)
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    DEFAULT_LIMITS,
    Actor,
    Draft,
    InsertResult,
    Limits,
    Message,
    Pick,
    Role,
    Slot,
    StoreStats,
    Watermarks,
)
from imbucket.domain.projection import Entry, project
from imbucket.domain.tags import Guard, takes_revoke
from imbucket.domain.validation import (
    check_actor,
    check_batch,
    check_bounded_seq,
    check_draft,
    check_id,
    check_message,
    check_role,
    check_seqs,
    check_short_text,
)
from imbucket.ports.fresh_sends import FreshSends, StoringFreshSends
from imbucket.ports.health import Health, HealthProbe, Reachability
from imbucket.ports.message_store import MessageStore
from imbucket.ports.read_marks import ReadMarks
from imbucket.ports.seq_store import SeqStore
from imbucket.ports.view_reads import ViewReads

DEFAULT_CLAIM_RETENTION_SECONDS = 7 * 24 * 3600
# Expired send claims are pruned at most once a minute per service, in bounded batches.
PRUNE_INTERVAL_MS = 60_000
PRUNE_BATCH = 1000
PRUNE_BATCHES = 10
# The conversation whose max_seq the health call reads (a read of a row that need not exist).
HEALTH_CONVERSATION = "imbucket-healthcheck"

P = ParamSpec("P")
R = TypeVar("R")


def _operation(method: Callable[P, R]) -> Callable[P, R]:
    """Name the use case in a StoreUnavailable raised under it ("pull_latest: …").

    The error keeps its class (OutcomeUnknown stays OutcomeUnknown) and chains the original.
    """
    name = method.__name__

    @functools.wraps(method)
    def named(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except StoreUnavailable as error:
            if getattr(error, "operation", None) is not None:
                raise  # named by the use case it ran under already
            renamed = type(error)(f"{name}: {error}")
            renamed.operation = name  # type: ignore[attr-defined]
            raise renamed from error

    return named


def now_ms() -> int:
    """Current server time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def new_server_msg_id() -> str:
    """A fresh server message id."""
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class Location:
    """Where a seq lives and what is stored there."""

    conversation_id: str
    seq: int
    doc_id: str
    doc_index: int
    slot_index: int
    slot: Slot | None
    max_seq: int


class MessageService:
    """The use cases of a message store. Validates every argument before anything is written."""

    def __init__(
        self,
        store: MessageStore,
        seqs: SeqStore,
        *,
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], int] = now_ms,
        new_id: Callable[[], str] = new_server_msg_id,
        claim_retention_seconds: int = DEFAULT_CLAIM_RETENTION_SECONDS,
        views: ViewReads | None = None,
        read_marks: ReadMarks | None = None,
        fresh_sends: FreshSends | None = None,
        cache_probe: HealthProbe | None = None,
        store_backend: str = "",
        authority: MessageStore | None = None,
    ) -> None:
        self.store = store
        # The store itself when ``store`` reads through a cache that may lag behind it: a
        # revoke refused for want of a message asks it again, so no refusal rests on a stale slot.
        self.authority = store if authority is None else authority
        self.seqs = seqs
        # Pulls read through views: fused (one round trip) when the backend offers it.
        self.views = pull_reads(store, seqs, views)
        # Mark-read raises the read seq in its tag write's round trips when the backend can.
        self.read_marks = read_marks or SeparateReadMarks(store, seqs)
        # A send of new client_msg_ids claims and allocates in one step when the backend can.
        self.fresh_sends = fresh_sends
        # ... and stores the messages in that step's transaction (one commit) when it can.
        self._storing: StoringFreshSends | None = None
        if isinstance(fresh_sends, StoringFreshSends):
            self._storing = fresh_sends
        self.limits = limits
        self._clock = clock
        self._new_id = new_id
        self.claim_retention_ms = claim_retention_seconds * 1000
        self._next_prune = clock() + PRUNE_INTERVAL_MS
        self._cache_probe = cache_probe
        self._store_backend = store_backend

    @property
    def layout(self) -> BucketLayout:
        """The bucket layout of the underlying store."""
        return self.store.layout

    @_operation
    def send(self, conversation_id: str, drafts: Sequence[Draft]) -> list[Message]:
        """Store drafts as new messages, once per (conversation_id, client_msg_id).

        A draft with a new client_msg_id gets the next seq, the server time and a fresh
        server_msg_id. A draft whose client_msg_id was sent before, also by a retry running
        at the same time, gets the message stored for it then (same seq, server_msg_id and
        times): never a second copy. Its other fields are not compared. Returns the messages
        in the drafts' order. A batch must not repeat a client_msg_id (InvalidMessage).

        Raises WriteConflict, before anything is written where it can tell, when a repeated
        client_msg_id's message has been purged or its seq holds another sender's message.

        When the store refuses the batch for good (WriteRefused, InvalidArgument), the error
        is raised after the batch's seqs that hold no message are purged: they never stay
        MISSING, and their client_msg_ids are used up (a retry gets WriteConflict). Other
        store errors leave the seqs claimed for a retry to fill (docs/sending.md).
        """
        self._conversation(conversation_id)
        checked = self._drafts(drafts)
        if not checked:
            return []
        now = self._clock()
        if now >= self._next_prune:
            self.prune_send_claims()
        fresh = self._store_fresh(conversation_id, checked, now)
        if fresh is not None:
            return fresh
        claimed, sent = self._claims(conversation_id, checked, now)
        # New drafts, and claimed ones whose sender stopped before storing them (or is
        # storing them right now: the insert stores one version and reports the other).
        sent_at = self._clock()
        pending = [
            sending.stamp(conversation_id, d, claimed[d.client_msg_id], self._new_id(), sent_at)
            for d in checked
            if d.client_msg_id not in sent
        ]
        if pending:
            result = self._insert(conversation_id, pending)
            sent.update((m.client_msg_id, m) for m in sending.stored(pending, result))
            late = [draft for draft in checked if draft.client_msg_id not in sent]
            sent.update(self._sent(conversation_id, late, claimed))
        sending.check_settled(checked, sent)
        return [sent[draft.client_msg_id] for draft in checked]

    @_operation
    def ingest(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """Store messages whose seqs are already set (the consumer path), idempotently.

        max_seq is raised to at least the highest ingested seq.
        """
        self._conversation(conversation_id)
        checked = [
            check_message(m, conversation_id, self.limits)
            for m in self._batch(messages, "messages")
        ]
        seqs = [m.seq for m in checked]
        if len(set(seqs)) != len(seqs):
            raise InvalidMessage("a batch must not hold the same seq twice")
        if not checked:
            return InsertResult()
        result = self.store.insert(conversation_id, checked)
        self.seqs.raise_max_seq(conversation_id, max(seqs))
        return result

    @_operation
    def pull(self, conversation_id: str, viewer_id: str, seqs: Sequence[int]) -> list[Entry]:
        """One entry per requested seq, in the order requested, as viewer_id sees it."""
        self._conversation(conversation_id)
        self._user(viewer_id, "viewer_id")
        return self._pull(conversation_id, viewer_id, check_seqs(seqs, self.limits))

    @_operation
    def pull_range(
        self, conversation_id: str, viewer_id: str, first: int, last: int
    ) -> list[Entry]:
        """Entries for seqs first..last inclusive, ascending."""
        self._conversation(conversation_id)
        self._user(viewer_id, "viewer_id")
        first, last = check_bounded_seq(first), check_bounded_seq(last)
        if last < first:
            raise InvalidArgument(f"last ({last}) is before first ({first})")
        if last - first + 1 > self.limits.max_seqs_per_call:
            raise InvalidArgument(f"at most {self.limits.max_seqs_per_call} seqs per call")
        return self._pull(conversation_id, viewer_id, list(range(first, last + 1)))

    @_operation
    def pull_latest(self, conversation_id: str, viewer_id: str, count: int = 20) -> list[Entry]:
        """The newest count seqs the viewer has not cleared, ascending."""
        self._conversation(conversation_id)
        self._user(viewer_id, "viewer_id")
        if type(count) is not int or not 1 <= count <= self.limits.max_seqs_per_call:
            raise InvalidArgument(f"count must be an int in 1..{self.limits.max_seqs_per_call}")
        marks, slots = self.views.view(conversation_id, viewer_id, Pick(latest=count))
        return project(viewer_id, marks.latest(count), slots, marks)

    @_operation
    def revoke(
        self,
        conversation_id: str,
        seq: int,
        actor: Actor,
        *,
        sender_role: Role = Role.MEMBER,
        nickname: str = "",
    ) -> bool:
        """Revoke seq for everyone. Returns False when it was already revoked (or purged)."""
        self._conversation(conversation_id)
        check_actor(actor, self.limits)
        check_role(sender_role)
        check_short_text(nickname, "nickname", self.limits)
        seq = check_seqs([seq], self.limits)[0]
        # The permission read, scoped to the actor: the revoke rules never need who deleted
        # the message. A slot holding anything was written at an allocated seq (max_seq only
        # moves up), so only an empty one costs the allocation check: two round trips in all.
        slot = self.store.get(conversation_id, [seq], actor.user_id).get(seq)
        if self.authority is not self.store and policy.revoke_needs_message(actor, slot):
            # A cache that lags may not show a message the store holds: the store settles it.
            slot = self.authority.get(conversation_id, [seq], actor.user_id).get(seq)
        if slot is None:
            self._allocated(conversation_id, [seq])
        if slot is not None and not takes_revoke(slot):
            return False
        policy.check_revoke(actor, None if slot is None else slot.message, sender_role)
        revoke = policy.make_revoke(actor, nickname, self._clock())
        return self.store.revoke(conversation_id, seq, revoke)

    @_operation
    def delete_for_me(self, conversation_id: str, seqs: Sequence[int], user_id: str) -> int:
        """Hide seqs from user_id only. Returns how many seqs changed."""
        self._conversation(conversation_id)
        self._user(user_id, "user_id")
        checked = check_seqs(seqs, self.limits)
        return self.store.delete_for(
            conversation_id, checked, user_id, self._guard(conversation_id)
        )

    @_operation
    def clear_history(self, conversation_id: str, user_id: str) -> int:
        """Clear the whole history for user_id (one watermark write). Returns the new floor."""
        self._conversation(conversation_id)
        self._user(user_id, "user_id")
        floor = Watermarks.clearing(self.seqs.max_seq(conversation_id))
        return self.seqs.raise_user_min_seq(conversation_id, user_id, floor)

    @_operation
    def clear_for_everyone(self, conversation_id: str, actor: Actor) -> int:
        """Clear the history for every member (owner or app admin). Returns the new floor."""
        self._conversation(conversation_id)
        policy.check_moderator(check_actor(actor, self.limits), "clear for everyone")
        floor = Watermarks.clearing(self.seqs.max_seq(conversation_id))
        return self.seqs.raise_min_seq(conversation_id, floor)

    @_operation
    def purge(self, conversation_id: str, seqs: Sequence[int], actor: Actor) -> int:
        """Physically delete seqs (owner or app admin); final. Returns how many were purged."""
        self._conversation(conversation_id)
        policy.check_moderator(check_actor(actor, self.limits), "physical delete")
        checked = check_seqs(seqs, self.limits)
        return self.store.purge(conversation_id, checked, self._guard(conversation_id))

    @_operation
    def mark_read(self, conversation_id: str, seqs: Sequence[int], reader_id: str) -> int:
        """Mark seqs read by reader_id (never the reader's own messages); raise the read seq."""
        self._conversation(conversation_id)
        self._user(reader_id, "reader_id")
        checked = check_seqs(seqs, self.limits)
        guard = self._guard(conversation_id)
        return self.read_marks.mark_read(conversation_id, checked, reader_id, guard)

    @_operation
    def max_seq(self, conversation_id: str) -> int:
        """Highest allocated seq of the conversation (0 if none)."""
        return self.seqs.max_seq(self._conversation(conversation_id))

    @_operation
    def inspect(self, conversation_id: str, seq: int) -> Location:
        """Where seq lives (doc_id, slot) and the raw slot stored there, if any."""
        self._conversation(conversation_id)
        seq = check_bounded_seq(seq)
        return Location(
            conversation_id=conversation_id,
            seq=seq,
            doc_id=self.layout.doc_id(conversation_id, seq),
            doc_index=self.layout.doc_index(seq),
            slot_index=self.layout.slot_index(seq),
            slot=self.store.get(conversation_id, [seq]).get(seq),
            max_seq=self.seqs.max_seq(conversation_id),
        )

    @_operation
    def stats(self) -> StoreStats:
        """Storage footprint of the store, and of the send claims (a side table)."""
        claims = self.seqs.send_claims()
        return replace(self.store.stats(), send_claims=claims.rows, send_claim_bytes=claims.bytes)

    @_operation
    def prune_send_claims(self) -> int:
        """Delete send claims older than the retention window; how many went (docs/sending.md).

        Runs by itself, at most once a minute, inside send; at most PRUNE_BATCHES bounded
        deletes per run. Call it from a periodic job when sends outpace that.
        """
        now = self._clock()
        self._next_prune = now + PRUNE_INTERVAL_MS
        before = now - self.claim_retention_ms
        pruned = 0
        for _ in range(PRUNE_BATCHES):
            deleted = self.seqs.prune_sends(before, PRUNE_BATCH)
            pruned += deleted
            if deleted < PRUNE_BATCH:
                break
        return pruned

    def health(self) -> Health:
        """Ask the store and the cache now whether they answer (for a readiness probe).

        Never raises: each part is asked once, within its configured timeouts, and one that
        fails is reported with what went wrong. Nothing is written.
        """
        try:
            self.seqs.max_seq(HEALTH_CONVERSATION)
            store = Reachability("store", self._store_backend, True)
        except ImbucketError as error:
            store = Reachability("store", self._store_backend, False, str(error))
        cache = self._cache_probe.probe() if self._cache_probe is not None else None
        return Health(store, cache)

    def close(self) -> None:
        """Release the store and the seq store."""
        self.store.close()
        self.seqs.close()

    def __enter__(self) -> MessageService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _drafts(self, drafts: object) -> list[Draft]:
        checked = [check_draft(draft, self.limits) for draft in self._batch(drafts, "drafts")]
        sending.check_unique(checked)
        return checked

    def _store_fresh(
        self, conversation_id: str, drafts: list[Draft], now: int
    ) -> list[Message] | None:
        """The common send claimed, allocated and stored in one step, when the backend can.

        The step stores through _insert, so a batch the store refuses for good gives its
        seqs up as on the general path. Where the backend can, the step writes the store's
        rows itself in its one statement instead, only for the store's own insert
        (``store_insert``; a refusal of that statement undoes it whole). None when the
        general path must run: a client_msg_id was claimed before, a seq already held
        something, or the engine refused the step's transaction or statement (nothing
        written: the general path claims the batch again, is refused, and gives its seqs
        up).
        """
        if self._storing is None:
            return None
        sent_at = self._clock()
        stamped = [sending.stamp(conversation_id, d, 0, self._new_id(), sent_at) for d in drafts]
        given_up: list[bool] = []
        stored: list[list[Message]] = []  # the numbered messages the step stored

        def insert(conversation: str, pending: list[Message]) -> InsertResult:
            stored[:] = [pending]
            try:
                return self._insert(conversation, pending)
            except (WriteRefused, InvalidArgument):
                given_up.append(True)
                raise

        try:
            since = now - self.claim_retention_ms
            first = self._storing.store_fresh(
                conversation_id, stamped, now, insert, store_insert=self.store.insert, since=since
            )
        except (WriteRefused, InvalidArgument):
            if given_up:
                raise
            return None
        if first is None:
            return None
        if stored and stored[0] and stored[0][0].seq == first:
            return list(stored[0])  # numbered already: not built twice
        return sending.numbered(stamped, first)

    def _claims(
        self, conversation_id: str, drafts: list[Draft], now: int
    ) -> tuple[dict[str, int], dict[str, Message]]:
        """The seq claimed for each draft, and the stored messages answering some already.

        New client_msg_ids only (the common send): one step claims and allocates them all.
        Otherwise (a retry, or nothing claimed in one step) the claims are read, the stored
        messages answering them read, and the others allocated.
        """
        ids = [d.client_msg_id for d in drafts]
        since = now - self.claim_retention_ms
        if self.fresh_sends is not None and self._storing is None:
            fresh = self.fresh_sends.claim_fresh(conversation_id, ids, at=now, since=since)
            if fresh is not None:
                return fresh, {}
        claimed = self.seqs.sent_seqs(conversation_id, ids, since=since)
        sent = self._sent(conversation_id, drafts, claimed)
        new = [cid for cid in ids if cid not in claimed]
        if new:
            # One seq per client_msg_id, also when retries of it run at the same time.
            claimed.update(self.seqs.allocate_sends(conversation_id, new, at=now, since=since))
        return claimed, sent

    def _insert(self, conversation_id: str, pending: list[Message]) -> InsertResult:
        """store.insert; a permanent refusal first gives up the batch's empty seqs.

        Once refused, the same messages are refused on every retry, so their seqs could
        never be filled: they are purged (a final PURGED tombstone, never reused). Seqs
        already holding a message (part of the batch, or a concurrent sender's) are kept.
        """
        try:
            return self.store.insert(conversation_id, pending)
        except (WriteRefused, InvalidArgument) as refused:
            seqs = [message.seq for message in pending]
            try:
                slots = self.store.get(conversation_id, seqs)
                empty = [s for s in seqs if s not in slots or slots[s].message is None]
                if empty:
                    self.store.purge(conversation_id, empty)
            except StoreUnavailable as error:  # the seqs stay claimed: a retry purges them
                refused.add_note(f"the batch's seqs were not given up: {error}")
            raise

    def _sent(
        self, conversation_id: str, drafts: list[Draft], claimed: dict[str, int]
    ) -> dict[str, Message]:
        """The stored messages answering the drafts whose client_msg_id has a seq: one read."""
        seqs = [claimed[d.client_msg_id] for d in drafts if d.client_msg_id in claimed]
        slots = self.store.get(conversation_id, seqs) if seqs else {}
        return sending.answers(drafts, claimed, slots)

    def _pull(self, conversation_id: str, viewer_id: str, seqs: list[int]) -> list[Entry]:
        marks, slots = self.views.view(conversation_id, viewer_id, Pick(seqs=tuple(seqs)))
        return project(viewer_id, seqs, slots, marks)

    def _guard(self, conversation_id: str) -> Guard:
        """The allocation check a tag write runs after its read, on the seqs found empty.

        A slot holding anything was written at an allocated seq (max_seq only moves up), so
        a write whose seqs all hold something skips the max_seq round trip.
        """

        def allocated(empty: list[int]) -> None:
            if empty:
                self._allocated(conversation_id, empty)

        return allocated

    def _allocated(self, conversation_id: str, seqs: Sequence[int]) -> list[int]:
        checked = check_seqs(seqs, self.limits)
        max_seq = self.seqs.max_seq(conversation_id) if checked else 0
        beyond = [seq for seq in checked if seq > max_seq]
        if beyond:
            raise SeqNotAllocated(f"seqs {beyond[:5]} are beyond max_seq {max_seq}")
        return checked

    def _conversation(self, conversation_id: str) -> str:
        return check_id(conversation_id, "conversation_id", self.limits)

    def _user(self, user_id: str, what: str) -> str:
        return check_id(user_id, what, self.limits)

    def _batch(self, items: object, what: str) -> list[object]:
        return check_batch(items, what, self.limits)
