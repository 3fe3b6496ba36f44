"""The FreshSends port: a send's claims and seqs in one step, when none was claimed before."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class FreshSends(Protocol):
    """The common send: every client_msg_id of the batch is new to the conversation.

    One call claims every client_msg_id and allocates its seq, all or nothing, in the fewest
    round trips the engine allows. When any of them has a claim already (a retry, or a
    claim past the retention window not pruned yet), nothing is written and the service
    takes the general path (``SeqStore.sent_seqs``, then ``SeqStore.allocate_sends``).
    Claims and the counter are taken in the same order as ``allocate_sends`` takes them
    (the counter first), so the two never deadlock. A backend without it always takes the
    general path: the same outcome in more round trips.
    """

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int
    ) -> dict[str, int] | None:
        """Claim each client_msg_id at time at (epoch ms) and give it the next seq.

        The seqs are consecutive in the order given, recorded with the claims, and max_seq
        moves to the last. Returns the seq of each client_msg_id, or None, with nothing
        written, when any of them has a claim (live or expired). Atomic: a call cut short
        leaves either everything or nothing, so running it again is safe (a second run
        finds the first one's claims and returns None). client_msg_ids are distinct and
        validated by the caller.
        """
        ...
