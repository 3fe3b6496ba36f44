"""The histories checker on hand-written histories (what it accepts and what it reports), and
on a fault-free run of the harness."""

from __future__ import annotations

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app import MessageService
from imbucket.testing.histories import (
    CLEAR,
    FAIL,
    OK,
    PULL_LATEST,
    PULL_RANGE,
    PURGE,
    READER_MIX,
    REVOKE,
    SEND,
    UNKNOWN,
    WRITER_MIX,
    Call,
    ClientSpec,
    Operation,
    Recorder,
    Seen,
    Workload,
    final_pulls,
    run_threads,
)
from imbucket.testing.history_check import check

pytestmark = pytest.mark.histories
CONV = "si_check"


def sent(start: float, end: float | None, *placed: tuple[int, str], outcome: str = OK) -> Operation:
    ids = tuple(cid for _, cid in placed) or ("lost-1",)
    call = Call(SEND, CONV, ids=ids)
    return Operation("writer", call, start, end, outcome, placed=placed if outcome == OK else ())


def message(seq: int, client_msg_id: str, revoked_by: str = "") -> Seen:
    return Seen(seq, "message", client_msg_id, revoked_by, False)


def pulled(
    start: float, end: float, *seen: Seen, bound: float = 0.0, viewer: str = "bob"
) -> Operation:
    seqs = (seen[0].seq, seen[-1].seq)
    call = Call(PULL_RANGE, CONV, viewer, seqs)
    return Operation("reader", call, start, end, OK, seen=seen, bound=bound)


def test_a_pull_after_an_acknowledged_send_must_show_its_message() -> None:
    history = [sent(1.0, 2.0, (1, "m1")), pulled(3.0, 3.1, Seen(1, "unallocated"))]
    [anomaly] = check(history)
    assert "seq 1 showed unallocated; admissible: message m1 unread" in anomaly
    assert "writer: send(si_check, m1) [1.000, 2.000]" in anomaly


def test_a_pull_during_the_send_may_show_it_or_not() -> None:
    send = sent(1.0, 2.0, (1, "m1"))
    assert check([send, pulled(1.5, 1.6, Seen(1, "unallocated"))]) == []
    assert check([send, pulled(1.5, 1.6, message(1, "m1"))]) == []
    assert check([send, pulled(1.5, 1.6, Seen(1, "missing"))]) == []  # allocated, not stored yet


def test_a_cached_pull_may_lag_by_its_bound_and_no_more() -> None:
    send, revoke = sent(1.0, 2.0, (1, "m1")), Call(REVOKE, CONV, "alice", (1,))
    revoked = Operation("writer", revoke, 3.0, 4.0, OK, number=1)
    stale = message(1, "m1")
    assert check([send, revoked, pulled(4.5, 4.6, stale, bound=1.0)]) == []
    [anomaly] = check([send, revoked, pulled(5.5, 5.6, stale, bound=1.0)])
    assert "showed message m1 unread; admissible: message m1 revoked by alice unread" in anomaly
    assert check([send, revoked, pulled(5.5, 5.6, message(1, "m1", "alice"), bound=1.0)]) == []


def test_a_write_of_unknown_outcome_may_show_from_its_start_on() -> None:
    revoke = Operation("writer", Call(REVOKE, CONV, "alice", (1,)), 3.0, 3.5, UNKNOWN)
    send = sent(1.0, 2.0, (1, "m1"))
    for seen in (message(1, "m1"), message(1, "m1", "alice")):
        assert check([send, revoke, pulled(9.0, 9.1, seen)]) == []
    [anomaly] = check([send, revoke, pulled(2.5, 2.6, message(1, "m1", "alice"))])
    assert "admissible: message m1 unread" in anomaly


def test_a_send_of_unknown_outcome_takes_effect_once_or_not_at_all() -> None:
    lost = sent(1.0, 2.0, (1, "lost-1"), outcome=UNKNOWN)
    assert check([lost, pulled(3.0, 3.1, Seen(1, "unallocated"))]) == []
    assert check([lost, pulled(3.0, 3.1, message(1, "lost-1"))]) == []
    [anomaly] = check(
        [lost, pulled(3.0, 3.1, message(1, "lost-1")), pulled(4.0, 4.1, Seen(1, "missing"))]
    )
    assert "seq 1 showed missing; admissible: message lost-1 unread" in anomaly
    twice = [lost, pulled(3.0, 3.1, message(1, "lost-1"), message(2, "lost-1"))]
    assert "si_check client_msg_id lost-1 is stored at seqs [1, 2]" in check(twice)


def test_no_seq_holds_two_messages() -> None:
    history = [sent(1.0, 2.0, (1, "m1")), pulled(3.0, 3.1, message(1, "m2"))]
    anomalies = check(history)
    assert "si_check seq 1 holds two messages: m1, m2" in anomalies
    assert any("showed message m2 unread; admissible: message m1 unread" in a for a in anomalies)


def test_pull_latest_ends_at_an_allowed_max_seq_and_starts_at_the_floor() -> None:
    sends = [sent(1.0, 2.0, (1, "m1")), sent(2.0, 3.0, (2, "m2"))]
    latest = Call(PULL_LATEST, CONV, "carol", count=20)
    short = Operation("reader", latest, 4.0, 4.1, OK, seen=(message(1, "m1"),))
    [anomaly] = check([*sends, short])
    assert "ends at seq 1 although seq 2 is allocated" in anomaly
    floor = Operation("writer", Call(CLEAR, CONV, "carol"), 3.0, 3.5, OK, number=2)
    cleared = Operation("reader", latest, 4.0, 4.1, OK, seen=(message(2, "m2"),))
    assert check([*sends, floor, cleared]) == []
    assert "although seq 1 is not cleared" in check([*sends, cleared])[0]


def test_a_call_that_fails_for_no_reason_is_reported() -> None:
    failed = Operation("writer", Call(REVOKE, CONV, "alice", (1,)), 1.0, 2.0, "fail", error="X")
    assert check([failed]) == ["writer: revoke(si_check, alice, seqs 1) [1.000, 2.000] raised X"]


def test_a_fault_free_run_on_the_memory_backend_is_admissible() -> None:
    service = MessageService(BucketMessageStore(MemoryBucketRepository()), MemorySeqStore())
    work = Workload("si_memory", "si_memory_ingest", operations=150, seconds=5.0, seed=8)
    recorder = Recorder()
    clients = [ClientSpec(f"writer-{i}", service, WRITER_MIX) for i in (1, 2)]
    run_threads([*clients, ClientSpec("reader", service, READER_MIX)], work, recorder)
    final_pulls(service, recorder, work)
    kinds = {op.call.kind for op in recorder.operations}
    assert kinds == set(WRITER_MIX) | set(READER_MIX)  # every kind of call was made
    assert check(recorder.operations) == []


def _retried_send_told_purged(*purges: Operation) -> list[Operation]:
    """A send of m1 of unknown outcome, then its retry told m1 went to seq 1 and was purged."""
    call = Call(SEND, CONV, ids=("m1",))
    lost = Operation("writer", call, 1.0, 2.0, UNKNOWN)
    told = "WriteConflict: client_msg_id 'm1' was sent as seq 1, since purged"
    retry = Operation("writer", call, 5.0, 6.0, FAIL, error=told)
    return [lost, *purges, retry]


def test_a_retried_send_may_find_its_message_purged_by_a_purge_that_may_have_run() -> None:
    purge = Operation("admin", Call(PURGE, CONV, "", (1,)), 3.0, 4.0, OK)
    assert check(_retried_send_told_purged(purge)) == []
    unsure = Operation("admin", Call(PURGE, CONV, "", (1,)), 3.0, None, UNKNOWN)
    assert check(_retried_send_told_purged(unsure)) == []


def test_a_send_told_purged_with_no_purge_of_its_seq_is_an_anomaly() -> None:
    other_seq = Operation("admin", Call(PURGE, CONV, "", (2,)), 3.0, 4.0, OK)
    for history in (_retried_send_told_purged(), _retried_send_told_purged(other_seq)):
        [anomaly] = check(history)
        assert "raised WriteConflict" in anomaly
    # Not a retry: the first attempt of a send cannot have stored its message before.
    purge = Operation("admin", Call(PURGE, CONV, "", (1,)), 3.0, 4.0, OK)
    _, *without_the_first_attempt = _retried_send_told_purged(purge)
    [anomaly] = check(without_the_first_attempt)
    assert "raised WriteConflict" in anomaly


def _send_told_purged(purge_start: float, purge_end: float | None) -> list[Operation]:
    """A first send of m1 and m2, told m1's seq 1 was purged; a purge of seq 1; pulls of both."""
    call = Call(SEND, CONV, ids=("m1", "m2"))
    told = "WriteConflict: client_msg_id 'm1' was sent as seq 1, since purged"
    send = Operation("writer", call, 5.0, 6.0, FAIL, error=told)
    outcome = OK if purge_end is not None else UNKNOWN
    purge = Operation("admin", Call(PURGE, CONV, "", (1,)), purge_start, purge_end, outcome)
    after = pulled(7.0, 8.0, Seen(1, "purged"), message(2, "m2"))
    return [send, purge, after]


def test_a_send_overlapped_by_a_purge_of_its_seq_may_be_told_purged() -> None:
    assert check(_send_told_purged(5.5, 5.8)) == []
    assert check(_send_told_purged(4.0, 5.5)) == []
    assert check(_send_told_purged(5.5, None)) == []


def test_a_first_send_told_purged_by_a_purge_that_ended_before_it_is_an_anomaly() -> None:
    anomalies = check(_send_told_purged(3.0, 4.0))
    assert any("raised WriteConflict" in anomaly for anomaly in anomalies)
