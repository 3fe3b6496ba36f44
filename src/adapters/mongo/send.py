"""A fresh send on MongoDB in three commands (``StoringFreshSends``; docs/sending.md).

The claims live in the data collection (``commands.ClaimDocs``), so the record of their seqs
rides on the command that stores the messages:

1. ``insertMany`` of the pending claims (no seq, an owner id), unordered: a client_msg_id
   claimed before is a duplicate key, and the send takes the general path (the claims that
   landed are deleted again);
2. the allocation (``findAndModify`` of the counter);
3. the messages' first write, ordered and led by the claims' records
   (``commands.claim_records``, ``RidingWrites.leading``): a claim taken over meanwhile stops
   the command before any message is written, and the general path reads the seq the claim
   holds.

A claim's seq is thus recorded no later than its message is stored, as a retry that finds
the claim relies on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.connection import translated
from imbucket.adapters.mongo.mark_read_writes import ClaimTaken, RidingWrites
from imbucket.adapters.mongo.seq import MongoSeqStore
from imbucket.domain import sending
from imbucket.domain.model import InsertResult, Message

Insert = Callable[[str, list[Message]], InsertResult]


class MongoFreshSends:
    """``StoringFreshSends`` over a seq store and the riding writes of its data collection.

    riding: the store's (``MongoBucketRepository.riding`` or ``MongoRowRepository.riding``),
    on the collection that keeps seqs' claims.
    """

    def __init__(self, seqs: MongoSeqStore, riding: RidingWrites) -> None:
        self.seqs = seqs
        self.riding = riding

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        """See ``MongoSeqStore.claim_fresh`` (the claims' seqs recorded on their own)."""
        return self.seqs.claim_fresh(conversation_id, client_msg_ids, at, since)

    def store_fresh(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        at: int,
        insert: Insert,
        store_insert: Insert | None = None,
        since: int = 0,
    ) -> int | None:
        """See ``imbucket.ports.fresh_sends.StoringFreshSends.store_fresh``.

        store_insert is not needed: the messages are always stored by insert.

        Uncontended: the claims' insert, the allocation, and insert's commands, the first
        of which records the claims' seqs. None when a client_msg_id was claimed before
        (nothing written), when a claim was taken over before its record (nothing stored),
        or when insert did not store every message (the claims hold their seqs).
        """
        ids = [m.client_msg_id for m in messages]
        if not ids:
            return None
        owner = uuid.uuid4().hex
        with translated("claim client_msg_ids"):
            if not self.seqs.claim_new(conversation_id, ids, owner, at, since):
                return None
        first = self.seqs.allocate(conversation_id, len(ids))
        seqs = {cid: first + offset for offset, cid in enumerate(ids)}
        records = commands.claim_records(self.seqs.claims, conversation_id, seqs, owner, at, since)
        try:
            with self.riding.leading(records):
                result = insert(conversation_id, sending.numbered(messages, first))
        except ClaimTaken:
            return None
        return first if len(result.inserted) == len(ids) else None
