"""Send claims (client_msg_id -> seq) are kept for a retention window, pruned, and counted.

A service on the backend under test with an injected clock (epoch ms): within the window a
retry gets the stored message back; after it, the client_msg_id is forgotten and a retry is
stored as a new message. Expired claims are deleted in bounded batches, by send itself at
most once a minute, and stats() counts the claims kept. See docs/sending.md.
"""

from __future__ import annotations

import time

import pytest

from imbucket.app import MessageService
from imbucket.app.service import PRUNE_INTERVAL_MS
from imbucket.domain.model import Draft
from imbucket.testing.rows import SEND_CLAIMS, needs

CONV = "si_alice_bob"
RETENTION_SECONDS = 3600
WINDOW_MS = RETENTION_SECONDS * 1000


pytestmark = needs(SEND_CLAIMS)


class Clock:
    """Epoch milliseconds that move only when told.

    It starts at the real time: a MongoDB TTL index deletes by the server's clock, so claims
    stamped in the past would vanish behind the test's back.
    """

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def clocked(service: MessageService, clock: Clock) -> MessageService:
    """The service's store and seqs under a service whose clock the test moves."""
    return MessageService(
        service.store,
        service.seqs,
        limits=service.limits,
        clock=clock,
        claim_retention_seconds=RETENTION_SECONDS,
    )


def draft(n: int) -> Draft:
    return Draft(send_id="alice", content=f"hi {n}", client_msg_id=f"c-{n}", recv_id="bob")


def test_a_retry_within_the_window_gets_the_stored_message(
    clocked: MessageService, clock: Clock
) -> None:
    [sent] = clocked.send(CONV, [draft(1)])
    clock.now += WINDOW_MS - 1
    assert clocked.send(CONV, [draft(1)]) == [sent]


def test_a_retry_after_the_window_is_stored_as_a_new_message(
    clocked: MessageService, clock: Clock
) -> None:
    [first] = clocked.send(CONV, [draft(1)])
    clock.now += WINDOW_MS + 1
    [again] = clocked.send(CONV, [draft(1)])
    assert again.seq == first.seq + 1 and again.server_msg_id != first.server_msg_id
    assert clocked.stats().messages == 2
    assert clocked.send(CONV, [draft(1)]) == [again]  # the new claim holds from now on


def test_stats_count_the_claims_kept(clocked: MessageService) -> None:
    assert clocked.stats().send_claims == 0
    clocked.send(CONV, [draft(1), draft(2)])
    clocked.send(CONV, [draft(3)])
    clocked.send(CONV, [draft(3)])  # a retry claims nothing more
    stats = clocked.stats()
    assert stats.send_claims == 3
    assert stats.send_claim_bytes > 0


def test_expired_claims_are_deleted_in_bounded_batches(
    clocked: MessageService, clock: Clock
) -> None:
    clocked.send(CONV, [draft(n) for n in range(1, 6)])
    clock.now += WINDOW_MS // 2
    clocked.send(CONV, [draft(6)])
    clock.now += WINDOW_MS // 2 + 1  # the first five expired, the sixth did not
    assert clocked.seqs.prune_sends(clock.now - WINDOW_MS, 2) == 2
    assert clocked.stats().send_claims == 4
    assert clocked.prune_send_claims() == 3
    assert clocked.stats().send_claims == 1
    assert clocked.prune_send_claims() == 0
    assert clocked.stats().messages == 6  # claims only: every message stays


def test_send_prunes_expired_claims_by_itself(clocked: MessageService, clock: Clock) -> None:
    clocked.send(CONV, [draft(1)])
    clock.now += WINDOW_MS + PRUNE_INTERVAL_MS
    clocked.send(CONV, [draft(2)])
    assert clocked.stats().send_claims == 1
