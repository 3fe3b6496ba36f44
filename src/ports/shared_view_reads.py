"""The SharedViewReads port: one store read answering the pulls of several viewers at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.model import Pick
from imbucket.ports.view_reads import View


@runtime_checkable
class SharedViewReads(Protocol):
    """The reads of many viewers' pulls of one conversation, in one round trip.

    A herd of pulls (every member of a group pulling the message just sent) reads the same
    buckets or rows: the store reads them once, with the counters and every viewer's own
    watermarks, and each viewer's answer is cut from that read. The SQL stores answer in one
    statement (one more only where ``ViewReads.view`` would need one too). The service joins
    concurrent pulls through ``imbucket.app.coalescing.CoalescedViews``.
    """

    def view_many(
        self, conversation_id: str, viewer_ids: Sequence[str], pick: Pick
    ) -> dict[str, View]:
        """Each viewer's answer, as ``ViewReads.view(conversation_id, viewer, pick)`` gives it.

        Keys are the distinct ``viewer_ids``; each value equals what that viewer's own
        ``view`` would return from the same committed state: its watermarks, and the slots
        of ``pick.of(marks)`` scoped to it (its own deletions and nobody else's). Every
        answer comes from one read of the store, taken when this call runs. Arguments are
        validated by the caller.
        """
        ...
