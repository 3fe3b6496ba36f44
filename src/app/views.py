"""The pull's reads for backends that cannot fuse them: watermarks, then the slots."""

from __future__ import annotations

from imbucket.domain.model import Pick
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore
from imbucket.ports.view_reads import View, ViewReads


class SeparateViews:
    """``ViewReads`` from a seq store and a message store: two round trips per pull.

    The reference answer every fused implementation must equal (the contract suite compares
    them), the path of a third-party backend, and what a cached backend without a fused view
    reads on a watermark miss (``imbucket.adapters.cached_views.CachedViews``).
    """

    def __init__(self, store: MessageStore, seqs: SeqStore) -> None:
        self.store = store
        self.seqs = seqs

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """Watermarks first, then the slots they let the viewer see."""
        marks = self.seqs.watermarks(conversation_id, viewer_id)
        wanted = pick.of(marks)
        slots = self.store.get(conversation_id, wanted, viewer_id) if wanted else {}
        return marks, slots


def pull_reads(store: MessageStore, seqs: SeqStore, fused: ViewReads | None) -> ViewReads:
    """What a pull reads through: the backend's fused reads, else ``SeparateViews``.

    The one place this is chosen: the service and a cached backend's miss path both ask here.
    """
    return fused if fused is not None else SeparateViews(store, seqs)
