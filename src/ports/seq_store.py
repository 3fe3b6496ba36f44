"""The SeqStore port: seq allocation and watermarks per conversation and user."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, runtime_checkable

from imbucket.domain.model import TableStats, Watermarks
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs


@runtime_checkable
class SeqStore(Protocol):
    """Durable counters. Every ``raise_*`` only moves a value up: a lower value is ignored.

    Values never set read as 0.
    """

    def allocate(self, conversation_id: str, n: int) -> int:
        """Reserve n >= 1 new consecutive seqs and return the first.

        Atomic and durable: no seq is ever handed out twice, even across restarts or to
        concurrent callers. max_seq becomes first + n - 1.
        """
        ...

    def max_seq(self, conversation_id: str) -> int:
        """Highest seq allocated (or ingested) in the conversation, 0 if none."""
        ...

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise max_seq to at least seq (the ingest path); returns the resulting max_seq."""
        ...

    def min_seq(self, conversation_id: str) -> int:
        """Conversation-wide floor: seqs below it are cleared for everyone."""
        ...

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Raise the conversation floor; returns the resulting value."""
        ...

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """The user's own floor: seqs below it are cleared for this user only."""
        ...

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user's floor in one write; returns the resulting value."""
        ...

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """Highest seq the user has read."""
        ...

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user's read seq; returns the resulting value."""
        ...

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """The seqs recorded by ``claim_sends`` for those of client_msg_ids that have one.

        Claims recorded before since (epoch ms) have expired and are left out.
        """
        ...

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Record client_msg_id -> seq, at time at (epoch ms), for each claim not recorded yet.

        Returns the recorded seq of every client_msg_id in claims: this call's, or the one an
        earlier (or concurrent) claim recorded first. A recorded seq never changes while it
        lives, and concurrent claims of one client_msg_id all get the same answer. A claim
        recorded before since has expired: it is replaced as if it were not there. One round
        trip where the engine allows (a multi-row upsert).
        """
        ...

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """The seq of every client_msg_id given: recorded before, or allocated now, once.

        Each client_msg_id without a live claim (none, or one recorded before since) is
        claimed at time at (epoch ms) and gets a new seq; those this call claims get
        consecutive seqs in the order given. Concurrent calls for one client_msg_id allocate
        exactly one seq between them: the others wait (bounded by the store's timeouts,
        then StoreUnavailable) for that seq and return it. Claiming and recording are one
        step where the engine allows (one transaction), so a caller that dies in between
        leaves neither a claim without a seq nor an allocated seq without a claim
        (docs/sending.md says what MongoDB does).
        """
        ...

    def prune_sends(self, before: int, limit: int) -> int:
        """Delete at most limit claims recorded before before (epoch ms); how many went.

        Engines that expire claims by themselves (a MongoDB TTL index) may delete none here.
        """
        ...

    def send_claims(self) -> TableStats:
        """Rows and bytes of the claims kept (expired ones not pruned yet included)."""
        ...

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """A page of at most ``limit`` >= 1 conversations' max_seq and min_seq.

        Like ``MessageStore.scan``: ``after=None`` first, then each page's cursor until
        None; engine order, one round trip per page. Conversations never written are absent.
        """
        ...

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """A page of at most ``limit`` per-user rows (clear floor and read seq), as above."""
        ...

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """A page of at most ``limit`` recorded send claims, as above."""
        ...

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """max_seq and min_seq of every conversation given, in one round trip where possible.

        Every id given is a key (values never set read as 0). The default reads one by one.
        """
        return {c: Counters(c, self.max_seq(c), self.min_seq(c)) for c in conversation_ids}

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """The clear floor and read seq of every (conversation_id, user_id) given, as above."""
        return {
            (c, u): UserSeqs(c, u, self.user_min_seq(c, u), self.read_seq(c, u)) for c, u in keys
        }

    def batch(self) -> AbstractContextManager[None]:
        """A block whose writes the engine may commit together; see ``MessageStore.batch``.

        Other engines write as usual (the default).
        """
        return nullcontext()

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """max_seq, min_seq and the user's min_seq, read together in one round trip."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
