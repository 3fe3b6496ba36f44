"""Seq allocation interrupted mid-way: no seq is ever handed out twice.

PostgreSQL allocates with one autocommitted upsert; MariaDB with START TRANSACTION, upsert,
SELECT, COMMIT. A connection lost before COMMIT rolls the transaction back, so that attempt
is made again. A connection lost while the upsert or the COMMIT is in flight leaves the
outcome unknown: allocate is not repeated then (a second upsert would allocate again) and
raises OutcomeUnknown. If the lost allocation was applied, its seqs are a gap, never handed
out, that pulls show as MISSING. A send allocates in the same step as its claims (one
statement on PostgreSQL, one transaction on MariaDB), so it never leaves such a gap.
"""

from __future__ import annotations

from itertools import count

import pytest

from imbucket.domain.errors import OutcomeUnknown, StoreUnavailable
from imbucket.domain.projection import Tombstone
from imbucket.testing.factories import draft
from tests.faults.conftest import ENGINES, KILL, LOSE_REPLY, MODES, STORES, Rig

MARIADB = [engine for engine in ENGINES if engine.values[0][1] == "mariadb"]
CONV = "sg_allocate"
N = 5


@pytest.mark.parametrize("rig", ENGINES, indirect=True)
@pytest.mark.parametrize("times", [1, None], ids=["one-fault", "server-gone"])
@pytest.mark.parametrize("mode", MODES)
def test_an_allocation_cut_at_any_statement_never_hands_a_seq_out_twice(
    rig: Rig, mode: str, times: int | None
) -> None:
    seqs = rig.service.seqs
    handed: list[int] = []  # every seq a successful allocate returned
    gaps: list[int] = []  # seqs of failed allocations that were applied all the same
    for at in count(1):
        before = seqs.max_seq(CONV)
        error: StoreUnavailable | None = None
        with rig.faults.armed(mode, at=at, times=times) as faults:
            try:
                first = seqs.allocate(CONV, N)
            except StoreUnavailable as raised:
                error = raised
        after = seqs.max_seq(CONV)
        if error is None:
            assert (first, after) == (before + 1, before + N)
            handed += range(first, first + N)
        elif after == before + N:
            assert isinstance(error, OutcomeUnknown)  # applied: the caller was told it may be
            gaps += range(before + 1, after + 1)
        else:
            assert after == before  # all or nothing
        if not faults.fired:
            break
    for _ in range(2):
        first = seqs.allocate(CONV, N)
        handed += range(first, first + N)
    assert len(handed) == len(set(handed))
    assert sorted(handed + gaps) == list(range(1, seqs.max_seq(CONV) + 1))
    # A gap comes only from a reply lost after the server committed the allocation.
    committed_then_lost = [1] if rig.engine == "postgres" else [4]  # the upsert, or COMMIT
    assert len(gaps) == (N * len(committed_then_lost) if mode == LOSE_REPLY else 0)


@pytest.mark.parametrize("rig", ENGINES, indirect=True)
def test_only_a_rolled_back_allocation_is_tried_again(rig: Rig) -> None:
    seqs = rig.service.seqs
    upsert = r"^INSERT INTO \w+_seqs"
    with rig.faults.armed(KILL, match=upsert) as faults:
        if rig.engine == "postgres":  # the upsert is the whole allocation: outcome unknown
            with pytest.raises(OutcomeUnknown, match="may or may not have been applied"):
                seqs.allocate(CONV, N)
        else:  # inside START TRANSACTION … COMMIT: rolled back, so made again
            assert seqs.allocate(CONV, N) == 1
    assert faults.sent(upsert) == (1 if rig.engine == "postgres" else 2)
    assert seqs.allocate(CONV, N) == (1 if rig.engine == "postgres" else N + 1)


@pytest.mark.parametrize("rig", MARIADB, indirect=True)
@pytest.mark.parametrize("mode", MODES)
def test_a_mariadb_allocation_cut_between_its_upsert_and_its_read_is_made_again(
    rig: Rig, mode: str
) -> None:
    seqs, read = rig.service.seqs, r"^SELECT \w+_seqs.max_seq"
    with rig.faults.armed(mode, match=read) as faults:
        assert seqs.allocate(CONV, N) == 1  # rolled back, then made again: no gap
    assert faults.sent(read) == 2
    with rig.faults.armed(mode, match=read, times=None), pytest.raises(StoreUnavailable) as error:
        seqs.allocate(CONV, N)
    assert not isinstance(error.value, OutcomeUnknown)  # every attempt was rolled back
    assert seqs.allocate(CONV, N) == N + 1


# The statement that allocates a fresh send's seqs, and the COMMIT where there is one: on
# PostgreSQL the fresh step is one autocommitted CTE (it commits itself); on MariaDB an upsert
# inside START TRANSACTION … COMMIT.
FRESH_STEP_CUTS = [
    pytest.param(
        STORES[0].values[0],
        r"^WITH counter AS \(INSERT INTO \w+_seqs",
        id="allocation-sql-row-postgres",
    ),
    pytest.param(STORES[1].values[0], r"^INSERT INTO \w+_seqs", id="allocation-sql-row-mariadb"),
    pytest.param(STORES[1].values[0], "^COMMIT", id="commit-sql-row-mariadb"),
]


@pytest.mark.parametrize(("rig", "cut"), FRESH_STEP_CUTS, indirect=["rig"])
def test_a_send_whose_allocation_reply_was_lost_is_made_again_without_a_gap(
    rig: Rig, cut: str
) -> None:
    # A fresh send claims and allocates in one step: a cut one rolls back whole, and one
    # committed before its reply was lost is found by the next attempt's claim.
    service = rig.service
    with rig.faults.armed(LOSE_REPLY, match=cut) as faults:
        [message] = service.send(CONV, [draft(1)])
    assert faults.fired
    assert message.seq == 1 and service.max_seq(CONV) == 1
    assert service.send(CONV, [draft(2)])[0].seq == 2
    first, second = service.pull(CONV, "bob", [1, 2])
    assert not isinstance(first, Tombstone) and first.seq == 1
    assert not isinstance(second, Tombstone)
