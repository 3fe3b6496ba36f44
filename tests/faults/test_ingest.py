"""A connection dropped in the middle of an ingest batch, at every statement of it.

Guarantee: whatever statement of an ingest loses its connection, and whether or not that
statement was applied, delivering the same batch again stores every message exactly once,
keeps every tag written before, and its InsertResult accounts for the whole batch.
"""

from __future__ import annotations

from itertools import count

import pytest

from imbucket.adapters.sql.faults import ATTEMPTS, Fault
from imbucket.domain.errors import StoreUnavailable
from tests.faults.conftest import MODES, STORES, Rig
from tests.faults.scenario import (
    LAST,
    assert_converged,
    assert_covers_batch,
    batch,
    prepare,
    retries,
)

pytestmark = pytest.mark.parametrize("rig", STORES, indirect=True)


@pytest.mark.parametrize("mode", MODES)
def test_an_ingest_that_fails_at_any_statement_converges_when_redelivered(
    rig: Rig, mode: str
) -> None:
    service = rig.service
    for at in count(1):
        conversation = f"sg_cut_{at}"
        prepare(service, conversation)
        with rig.faults.armed(mode, at=at, times=None) as faults:  # the server stays away
            try:
                service.ingest(conversation, batch(conversation))
            except StoreUnavailable:
                failed = True
            else:
                failed = False
        if not faults.fired:  # the batch took fewer statements: every one has been cut
            break
        assert failed
        assert len(faults.fired) == ATTEMPTS[Fault.LOST]  # the cut statement, tried 3 times
        assert_covers_batch(service.ingest(conversation, batch(conversation)))
        assert_converged(service, conversation)
    assert at > 4, "the batch should span several statements"
    # Each conversation holds its batch but the purged seq, once: nothing is stored twice.
    assert service.stats().messages == at * (LAST - 1)


@pytest.mark.parametrize("mode", MODES)
def test_one_lost_connection_in_an_ingest_is_repaired_by_one_more_attempt(
    rig: Rig, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = rig.service
    for at in count(1):
        conversation = f"sg_once_{at}"
        prepare(service, conversation)
        caplog.clear()
        with rig.faults.armed(mode, at=at, times=1) as faults:
            result = service.ingest(conversation, batch(conversation))
        if not faults.fired:
            break
        assert retries(caplog) == 1
        cut = faults.statements[faults.fired[0] - 1]
        assert cut in faults.statements[faults.fired[0] :]  # sent again
        assert_covers_batch(result)
        assert_converged(service, conversation)
    assert at > 4
