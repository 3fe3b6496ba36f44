"""Idempotent send: one stored copy per (conversation_id, client_msg_id), retries included."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.app.service import now_ms
from imbucket.domain.errors import InvalidMessage, WriteConflict
from imbucket.domain.model import Actor, Role
from imbucket.domain.projection import MessageView
from imbucket.ports.seq_store import SeqStore
from imbucket.testing.concurrency import WRITERS, run_together, send_from_processes
from imbucket.testing.dump import dump
from imbucket.testing.factories import CONV, draft
from imbucket.testing.rows import PERSISTENT, SEND_CLAIMS, SQL, Config, backends, needs

PROCESSES = 3


def stored_seqs(service: MessageService) -> list[int]:
    """Seqs of the conversation that hold a message."""
    slots = service.store.get(CONV, list(range(1, service.max_seq(CONV) + 1)))
    return sorted(seq for seq, slot in slots.items() if slot.message is not None)


@needs(SEND_CLAIMS)
def test_sending_twice_returns_the_original(service: MessageService) -> None:
    first = service.send(CONV, [draft(1), draft(2)])
    again = service.send(CONV, [draft(1), draft(2)])
    assert again == first  # same seqs, server_msg_ids and server times
    assert service.max_seq(CONV) == 2
    assert stored_seqs(service) == [1, 2]
    assert service.stats().messages == 2


@needs(SEND_CLAIMS)
def test_a_retry_returns_the_original_even_if_the_draft_changed(service: MessageService) -> None:
    [original] = service.send(CONV, [draft(1)])
    [again] = service.send(CONV, [replace(draft(1), content="edited on the retry")])
    assert again == original and again.content == "draft 1"
    assert service.max_seq(CONV) == 1


@needs(SEND_CLAIMS)
def test_a_batch_mixing_new_and_sent_drafts(service: MessageService) -> None:
    old = service.send(CONV, [draft(1), draft(2)])
    mixed = service.send(CONV, [draft(3), draft(2), draft(4), draft(1)])
    assert [m.seq for m in mixed] == [3, 2, 4, 1]
    assert mixed[1] == old[1] and mixed[3] == old[0]
    assert [m.content for m in mixed] == ["draft 3", "draft 2", "draft 4", "draft 1"]
    assert service.max_seq(CONV) == 4
    assert stored_seqs(service) == [1, 2, 3, 4]


def test_client_msg_ids_are_per_conversation(service: MessageService) -> None:
    [here] = service.send(CONV, [draft(1)])
    [there] = service.send("sg_elsewhere", [draft(1)])
    assert (here.seq, there.seq) == (1, 1)
    assert here.server_msg_id != there.server_msg_id


def test_one_client_msg_id_twice_in_a_batch_is_refused(service: MessageService) -> None:
    service.send(CONV, [draft(1)])
    before = dump(service)
    with pytest.raises(InvalidMessage, match="same client_msg_id twice"):
        service.send(CONV, [draft(2), replace(draft(2), content="again")])
    assert dump(service) == before


@pytest.fixture
def _frequent_thread_switches() -> Iterator[None]:
    """Switch threads often so that retries really overlap between round trips."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def assert_dense(service: MessageService, conversation_id: str = CONV) -> None:
    """Every seq up to max_seq holds a message: no seq was allocated and given up."""
    last = service.max_seq(conversation_id)
    entries = service.pull_range(conversation_id, "bob", 1, last) if last else []
    assert [e for e in entries if not isinstance(e, MessageView)] == []


@needs(SEND_CLAIMS)
@pytest.mark.usefixtures("_frequent_thread_switches")
def test_concurrent_retries_store_one_copy(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    batch = [draft(1), draft(2), draft(3)]
    results = run_together(WRITERS, lambda _: service.send(CONV, batch))
    assert all(result == results[0] for result in results)
    assert [m.content for m in results[0]] == ["draft 1", "draft 2", "draft 3"]
    assert [m.seq for m in results[0]] == [2, 3, 4]
    assert service.max_seq(CONV) == 4
    assert service.stats().messages == 4
    assert_dense(service)


@needs(SEND_CLAIMS)
@pytest.mark.usefixtures("_frequent_thread_switches")
def test_concurrent_retries_to_a_new_conversation_allocate_one_seq(
    service: MessageService,
) -> None:
    results = run_together(WRITERS, lambda _: service.send("si_new_pair", [draft(1)]))
    assert all(result == results[0] for result in results)
    assert results[0][0].seq == 1
    assert service.max_seq("si_new_pair") == 1
    assert_dense(service, "si_new_pair")


def shared_rows() -> list[Any]:
    """Rows that other processes can open too: servers, and SQLite (on a file here)."""
    rows = {param.id: param for param in [*backends(PERSISTENT), *backends(SQL)]}
    return list(rows.values())


@needs(SEND_CLAIMS)
@pytest.mark.parametrize("backend_config", shared_rows(), indirect=True)
def test_retries_from_several_processes_allocate_one_seq(
    backend_config: Config, open_backend: Any, tmp_path: Path
) -> None:
    config = backend_config
    if config["store"]["url"] == "sqlite://":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
        config = {**config, "store": {**config["store"], "url": url}}
    service = open_backend(**config)
    results = send_from_processes(PROCESSES, config, "si_new_pair", [draft(1), draft(2)])
    assert all(result == results[0] for result in results)
    assert [seq for seq, _ in results[0]] == [1, 2]
    assert service.max_seq("si_new_pair") == 2
    assert_dense(service, "si_new_pair")


class LookupMissesOnce:
    """A SeqStore whose first ``sent_seqs`` finds nothing: a lookup made before a claim landed."""

    def __init__(self, seqs: SeqStore) -> None:
        self._seqs = seqs
        self._missed = False

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        if not self._missed:
            self._missed = True
            return {}
        return self._seqs.sent_seqs(conversation_id, client_msg_ids, since=since)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._seqs, name)


@needs(SEND_CLAIMS)
def test_a_retry_that_missed_the_claim_allocates_nothing(service: MessageService) -> None:
    # The first sender claimed draft-1 (seq 1), then stopped before storing it.
    assert service.seqs.allocate_sends(CONV, ["draft-1"], at=now_ms()) == {"draft-1": 1}
    # This retry looked before the claim landed: its claim finds the first one's seq.
    real_seqs = service.seqs
    service.seqs = LookupMissesOnce(real_seqs)  # type: ignore[assignment]
    try:
        [message] = service.send(CONV, [draft(1)])
    finally:
        service.seqs = real_seqs
    assert message.seq == 1  # the first sender's seq, stored by this retry
    assert service.max_seq(CONV) == 1
    [stored] = service.pull(CONV, "bob", [1])
    assert isinstance(stored, MessageView) and stored.message == message
    assert service.send(CONV, [draft(1)]) == [message]


@needs(SEND_CLAIMS)
def test_a_retry_stores_a_claimed_message_its_sender_never_stored(service: MessageService) -> None:
    seq = service.seqs.allocate(CONV, 1)
    service.seqs.claim_sends(CONV, {"draft-1": seq}, at=now_ms())  # the sender crashed here
    [message] = service.send(CONV, [draft(1)])
    assert message.seq == seq and message.content == "draft 1"
    assert service.max_seq(CONV) == seq
    assert service.send(CONV, [draft(1)]) == [message]


@needs(SEND_CLAIMS)
def test_a_retry_of_a_purged_message_is_refused(service: MessageService) -> None:
    service.send(CONV, [draft(1), draft(2)])
    service.purge(CONV, [1], Actor("olivia", Role.OWNER))
    before = dump(service)
    with pytest.raises(WriteConflict, match="purged"):
        service.send(CONV, [draft(3), draft(1)])
    assert dump(service) == before


@needs(SEND_CLAIMS)
def test_another_sender_reusing_a_client_msg_id_is_refused(service: MessageService) -> None:
    service.send(CONV, [draft(1)])
    before = dump(service)
    with pytest.raises(WriteConflict, match="another message"):
        service.send(CONV, [draft(1, send_id="mallory")])
    assert dump(service) == before
