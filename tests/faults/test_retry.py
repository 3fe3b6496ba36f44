"""Bounded retries on the real engines: what is tried again, how often, and what is not.

A connection lost with the outcome unknown is tried again for idempotent work only (every
statement of the stores but seq allocation), at most ATTEMPTS times; a server that stays
away gives StoreUnavailable after those attempts.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import event

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.adapters.sql.faults import ATTEMPTS, Fault
from imbucket.app import MessageService
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Actor, Role
from imbucket.testing.factories import draft, messages
from tests.faults.conftest import MODES, STORES, Rig
from tests.faults.scenario import REVOKE, retries

pytestmark = pytest.mark.parametrize("rig", STORES, indirect=True)
CONV = "sg_retry"
# A data write, not a seq counter; sql-row's purge on PostgreSQL leads with a CTE of DELETEs.
WRITE = r"^(WITH\b[\s\S]*\)\s*)?(INSERT|UPDATE|DELETE)\b(?!.*_seqs)"
WATERMARK = r"^INSERT INTO \w+_user_seqs"
Operation = Callable[[MessageService, str], object]
# Each idempotent write, and the statement of it whose connection is broken.
OPERATIONS: dict[str, tuple[Operation, str]] = {
    "delete_for_me": (lambda s, c: s.delete_for_me(c, [2, 3], "bob"), WRITE),
    "mark_read": (lambda s, c: s.mark_read(c, [2, 3], "carol"), WRITE),
    "revoke": (lambda s, c: s.store.revoke(c, 2, REVOKE), WRITE),  # a fixed time: comparable
    "purge": (lambda s, c: s.purge(c, [3], Actor("owner", Role.OWNER)), WRITE),
    "clear_history": (lambda s, c: s.clear_history(c, "bob"), WATERMARK),
    "ingest": (lambda s, c: s.ingest(c, messages(1, 6, c)), WRITE),
}


@pytest.mark.parametrize("mode", MODES)
def test_every_idempotent_write_survives_one_lost_connection(
    rig: Rig, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = rig.service
    for name, (operation, statement) in OPERATIONS.items():
        conversation = f"sg_{name}"
        service.ingest(conversation, messages(1, 4, conversation))
        caplog.clear()
        with rig.faults.armed(mode, match=statement) as faults:
            operation(service, conversation)
        assert len(faults.fired) == 1 and retries(caplog) == 1, name
        twin = reference(conversation)
        operation(twin, conversation)
        for viewer in ("alice", "bob", "carol"):
            expected = twin.pull_range(conversation, viewer, 1, 6)
            assert service.pull_range(conversation, viewer, 1, 6) == expected, name


@pytest.mark.parametrize("mode", MODES)
def test_a_read_survives_one_lost_connection(
    rig: Rig, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = rig.service
    service.ingest(CONV, messages(1, 4, CONV))
    expected = service.pull_latest(CONV, "bob")
    with rig.faults.armed(mode, at=1) as faults:
        assert service.pull_latest(CONV, "bob") == expected
    assert len(faults.fired) == 1 and retries(caplog) == 1
    assert faults.statements[0] == faults.statements[1]  # the same read, sent again


def test_a_send_whose_insert_reply_was_lost_is_stored_once(rig: Rig) -> None:
    service = rig.service
    with rig.faults.armed("lose-reply", match=r"^INSERT\b.*\bimb_\w+_(messages|docs)\b"):
        [sent] = service.send(CONV, [draft(1)])  # applied, then tried again: a duplicate
    [entry] = service.pull(CONV, "bob", [1])
    assert entry.seq == sent.seq == 1 and entry.content == sent.content  # type: ignore[union-attr]
    assert service.stats().messages == 1


def test_a_server_that_stays_away_gives_store_unavailable_after_bounded_attempts(
    rig: Rig,
) -> None:
    service = rig.service
    service.ingest(CONV, messages(1, 2, CONV))
    connects: list[object] = []
    event.listen(rig.faults.engine, "do_connect", lambda *args: connects.append(args))
    rig.proxy.close()  # pooled connections dropped, the port closed: refused from now on
    attempts = ATTEMPTS[Fault.UNREACHABLE]
    with (
        rig.faults.armed("kill", at=10**9) as faults,  # only watches
        pytest.raises(StoreUnavailable, match=f"unreachable after {attempts} attempts"),
    ):
        service.pull(CONV, "bob", [1, 2])
    # The statement on the pooled connection, then each attempt to connect again.
    assert len(faults.statements) == 1
    assert len(connects) == attempts - 1


def reference(conversation: str) -> MessageService:
    """The state each write starts from, on the memory backend."""
    twin = MessageService(BucketMessageStore(MemoryBucketRepository()), MemorySeqStore())
    twin.ingest(conversation, messages(1, 4, conversation))
    return twin
