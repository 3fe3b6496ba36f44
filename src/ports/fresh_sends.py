"""The FreshSends port: a send's claims and seqs in one step, when none was claimed before."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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


@runtime_checkable
class StoringFreshSends(FreshSends, Protocol):
    """``FreshSends`` that also stores the messages in the step's own transaction.

    A fresh send then commits once: the claims, the allocation and the messages are kept
    together or not at all, so no seq is left claimed without its message.
    """

    def store_fresh(
        self,
        conversation_id: str,
        client_msg_ids: Sequence[str],
        at: int,
        store: Callable[[Mapping[str, int]], bool],
    ) -> dict[str, int] | None:
        """``claim_fresh``, then store(seqs) in the same transaction, all or nothing.

        store is handed the seq of each client_msg_id and stores the messages through the
        store's own calls, which join the transaction; it returns whether every message went
        in. Returns the seqs, or None with nothing written when a client_msg_id has a claim
        or store returned False. An error store raises is raised with nothing written. The
        step may run store again after a transient fault (the first run was undone).
        """
        ...
