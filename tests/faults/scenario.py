"""A conversation with tags waiting for their messages, the batch that brings them, and checks.

Buckets hold BUCKET_SIZE = 10 slots here, so that a small batch spans several. Before the
batch: seqs 1-3 are stored (redelivered by the batch), bob deleted 5 and 15, the owner
revoked 7, carol read 9 and 16 and 11 was purged, all before their messages arrived. The
batch is seqs 1-21: three buckets, one of them new. A fault-free run of the same calls on
the memory backend is what every faulted run must end up equal to.
"""

from __future__ import annotations

import logging

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app import MessageService
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import InsertResult, Message, Revoke, Role
from imbucket.testing.factories import messages

BUCKET_SIZE = 10
LAST = 21
PURGED = 11
REVOKE = Revoke("owner", Role.OWNER, "The owner", 1_700_000_000_500)
VIEWERS = ("alice", "bob", "carol")


def prepare(service: MessageService, conversation_id: str) -> None:
    """Store seqs 1-3 and write tags on seqs whose messages are not stored yet."""
    service.ingest(conversation_id, messages(1, 3, conversation_id))
    store = service.store
    store.delete_for(conversation_id, [5, 15], "bob")
    store.revoke(conversation_id, 7, REVOKE)
    store.mark_read(conversation_id, [9, 16], "carol")
    store.purge(conversation_id, [PURGED])


def batch(conversation_id: str) -> list[Message]:
    """The batch redelivered after a fault."""
    return messages(1, LAST, conversation_id)


def expected(conversation_id: str) -> MessageService:
    """The same conversation, prepared and ingested on the memory backend without a fault."""
    repository = MemoryBucketRepository(BucketLayout(BUCKET_SIZE))
    service = MessageService(BucketMessageStore(repository), MemorySeqStore())
    prepare(service, conversation_id)
    service.ingest(conversation_id, batch(conversation_id))
    return service


def assert_converged(service: MessageService, conversation_id: str) -> None:
    """Every message stored once, tags as they were: equal to the fault-free run, slot by slot."""
    reference = expected(conversation_id)
    seqs = list(range(1, LAST + 1))
    assert service.store.get(conversation_id, seqs) == reference.store.get(conversation_id, seqs)
    assert service.max_seq(conversation_id) == LAST
    for viewer in VIEWERS:
        view = service.pull_range(conversation_id, viewer, 1, LAST)
        assert view == reference.pull_range(conversation_id, viewer, 1, LAST)


def assert_covers_batch(result: InsertResult) -> None:
    """The result of a (re-)ingest accounts for the whole batch: nothing lost, nothing else."""
    assert result.conflicts == ()
    assert result.purged == (PURGED,)
    assert not set(result.inserted) & set(result.duplicates)
    stored = sorted(result.inserted + result.duplicates)
    assert stored == [seq for seq in range(1, LAST + 1) if seq != PURGED]


def retries(caplog: pytest.LogCaptureFixture) -> int:
    """Attempts the SQL engine made again, from its warnings."""
    return sum(
        1
        for record in caplog.records
        if record.name == "imbucket.adapters.sql.engine" and record.levelno == logging.WARNING
    )
