"""What send makes of its insert's result: its own message found stored is not a conflict.

A store write whose connection was lost after it was applied is tried again, and then
reports the message as a duplicate; send must still succeed. A different message in an
allocated seq is a real conflict.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app import MessageService
from imbucket.domain.errors import WriteConflict
from imbucket.domain.model import InsertResult, Message
from imbucket.testing.factories import CONV, draft, message


class RetriedStore(BucketMessageStore):
    """Applies every insert twice and answers with the second result, as a retried write."""

    def insert(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        super().insert(conversation_id, messages)
        return super().insert(conversation_id, messages)


def test_a_send_whose_insert_was_applied_then_retried_succeeds() -> None:
    store = RetriedStore(MemoryBucketRepository())
    service = MessageService(store, MemorySeqStore())
    [sent] = service.send(CONV, [draft(1)])
    assert store.get(CONV, [1])[1].message == sent


def test_a_send_into_a_seq_holding_another_message_is_a_conflict() -> None:
    store = BucketMessageStore(MemoryBucketRepository())
    store.insert(CONV, [message(1)])  # written behind the seq counter's back
    with pytest.raises(WriteConflict):
        MessageService(store, MemorySeqStore()).send(CONV, [draft(1)])
