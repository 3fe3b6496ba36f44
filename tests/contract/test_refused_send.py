"""A send the store refuses for good leaves no seq that can never be filled.

The refusal is injected by wrapping the store's insert (after it stored part of the batch,
as a batch split into several statements can be), so it runs on every backend row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.domain.errors import InvalidArgument, StoreUnavailable, WriteConflict, WriteRefused
from imbucket.domain.model import InsertResult, Message
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, draft
from imbucket.testing.rows import SEND_CLAIMS, needs


def refuse_inserts(service: MessageService, error: Exception, stored: int) -> list[int]:
    """Make the next insert store its first `stored` messages, then raise error."""
    store: Any = service.store
    original = store.insert
    calls: list[int] = []

    def insert(conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        calls.append(len(messages))
        store.insert = original
        original(conversation_id, list(messages)[:stored])
        raise error

    store.insert = insert
    return calls


REFUSALS = pytest.mark.parametrize(
    "error",
    [WriteRefused("too large for the engine"), InvalidArgument("the database refused a value")],
    ids=["too-large", "refused-value"],
)


def refused_send(service: MessageService, error: Exception) -> list[Any]:
    """Send 1, then 2..6 refused after 2 and 3 are stored; the drafts of 2..6."""
    service.send(CONV, [draft(0)])
    batch = [draft(n) for n in range(1, 6)]
    refuse_inserts(service, error, stored=2)
    with pytest.raises(type(error)):
        service.send(CONV, batch)
    return batch


@REFUSALS
def test_a_refused_send_purges_its_empty_seqs(service: MessageService, error: Exception) -> None:
    refused_send(service, error)
    entries = service.pull(CONV, "bob", [2, 3, 4, 5, 6])
    assert [type(e) for e in entries[:2]] == [MessageView, MessageView]
    assert entries[2:] == [Tombstone(s, TombstoneReason.PURGED) for s in (4, 5, 6)]
    assert [m.seq for m in service.send(CONV, [draft(9)])] == [7]


@REFUSALS
@needs(SEND_CLAIMS)
def test_a_retry_of_a_refused_send_finds_its_stored_part(
    service: MessageService, error: Exception
) -> None:
    batch = refused_send(service, error)
    # The stored part is found again by a retry of its drafts; the refused part is used up.
    assert [m.seq for m in service.send(CONV, batch[:2])] == [2, 3]
    with pytest.raises(WriteConflict):
        service.send(CONV, batch[2:])
    assert [m.seq for m in service.send(CONV, [draft(9)])] == [7]


@needs(SEND_CLAIMS)
def test_an_unavailable_store_leaves_the_seqs_claimed_for_a_retry(
    service: MessageService,
) -> None:
    batch = [draft(n) for n in range(1, 4)]
    refuse_inserts(service, StoreUnavailable("server gone"), stored=1)
    with pytest.raises(StoreUnavailable):
        service.send(CONV, batch)
    assert service.pull(CONV, "bob", [2])[0] == Tombstone(2, TombstoneReason.MISSING)
    assert [m.seq for m in service.send(CONV, batch)] == [1, 2, 3]
    assert all(isinstance(e, MessageView) for e in service.pull(CONV, "bob", [1, 2, 3]))
