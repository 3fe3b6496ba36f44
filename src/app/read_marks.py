"""Mark-read for backends that cannot fuse it: the tag write, then the read-seq raise."""

from __future__ import annotations

from collections.abc import Sequence

from imbucket.domain.tags import Guard
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore


class SeparateReadMarks:
    """``ReadMarks`` from a message store and a seq store: the raise is a write of its own.

    The path of memory (cached or not) and of a third-party backend without one (MongoDB's
    ``imbucket.adapters.mongo.read_marks.MongoReadMarks`` also writes twice, but reads less).
    """

    def __init__(self, store: MessageStore, seqs: SeqStore) -> None:
        self.store = store
        self.seqs = seqs

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """The store's mark_read, then the read seq raised to the highest seq."""
        changed = self.store.mark_read(conversation_id, seqs, reader_id, guard)
        if seqs:
            self.seqs.raise_read_seq(conversation_id, reader_id, max(seqs))
        return changed
