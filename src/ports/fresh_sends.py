"""The FreshSends port: a send's claims and seqs in one step, when none was claimed before."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.model import InsertResult, Message


@runtime_checkable
class FreshSends(Protocol):
    """The common send: every client_msg_id of the batch is new to the conversation.

    One call claims every client_msg_id and allocates its seq, in the fewest round trips the
    engine allows. When any of them has a claim already (a retry, or a claim past the
    retention window not pruned yet), nothing is written (on MongoDB the claims of the batch
    that did land are deleted again) and the service takes the general path
    (``SeqStore.sent_seqs``, then ``SeqStore.allocate_sends``).
    Claims and the counter are taken in the same order as ``allocate_sends`` takes them
    (the counter first), so the two never deadlock. A backend without it always takes the
    general path: the same outcome in more round trips.
    """

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        """Claim each client_msg_id at time at (epoch ms) and give it the next seq.

        The seqs are consecutive in the order given, recorded with the claims, and max_seq
        moves to the last. Returns the seq of each client_msg_id, or None, with nothing
        written, when any of them has a claim (live or expired). since: the start of the
        retention window (claims of since or later are live; an engine that expires claims
        by itself stamps the new ones to expire one window after at). Running it again is
        safe (a second run finds the first one's claims and returns None): on SQL a call cut
        short leaves everything or nothing; on MongoDB (no multi-document transaction) it
        may leave claims pending, as ``allocate_sends`` may, which a retry takes over after
        the lease. client_msg_ids are distinct and validated by the caller.
        """
        ...


@runtime_checkable
class StoringFreshSends(FreshSends, Protocol):
    """``FreshSends`` that also stores the messages, in the step's transaction if it can.

    Where the engine keeps the step and the insert in one transaction, a fresh send commits
    once. Where it does not (an implementation says why), the claims and seqs are committed
    first, as by ``claim_fresh``, and stay when the messages are not stored: the general
    path finds them.
    """

    def store_fresh(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        at: int,
        insert: Callable[[str, list[Message]], InsertResult],
        store_insert: Callable[[str, list[Message]], InsertResult] | None = None,
        since: int = 0,
    ) -> int | None:
        """Claim the messages' client_msg_ids at time at, allocate and store them by insert.

        messages are stamped but not numbered (their seq is ignored): they go to the next
        seqs, consecutive in the order given, and max_seq moves to the last; insert (the
        caller's, whose store statements join the step's transaction) stores them numbered.
        store_insert is the ``MessageStore.insert`` that insert runs: where it is the own
        insert of the store the step writes to, the step may write the rows that insert
        would write in its own statement, without calling insert (so whatever insert adds
        around it, such as giving up seqs after a refusal, does not run: the step does so
        only for messages that store would accept, and a refusal of that statement leaves
        nothing written, like a client_msg_id found claimed).
        Returns the first seq, or None when a client_msg_id has a claim (live or expired) or
        insert did not store every message. In one transaction, None and a failure of the
        engine leave nothing written (but a reply lost after the commit: see
        ``claim_fresh``, a second run returns None); an ImbucketError raised by insert
        itself commits what was written first, then is raised, as if the step and the
        insert were two transactions. since: as for ``claim_fresh``.
        """
        ...
