"""The FreshSends port: a send's claims and seqs in one step, when none was claimed before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


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
