"""The ReadMarks port: a mark-read's tags and the reader's read seq, written together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from imbucket.domain.tags import Guard


@runtime_checkable
class ReadMarks(Protocol):
    """Mark-read: ``MessageStore.mark_read``, then ``SeqStore.raise_read_seq`` to the highest seq.

    Backends whose store and seq store live in one database raise the read seq in the tag
    write's own round trips (its read, one statement), so a mark-read costs what every tag
    write costs: the read and one conditional write. A backend without it is served by
    ``imbucket.app.read_marks.SeparateReadMarks``: one more round trip, the same outcome.
    """

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """Mark seqs read by reader_id and raise reader_id's read seq to ``max(seqs)``.

        Returns how many seqs changed, as ``MessageStore.mark_read``. ``guard`` is called as
        there, except that an implementation which read max_seq in the same round trip may
        skip it when no seq found empty is beyond that max_seq (they are all allocated).
        When guard raises, the read seq is not raised. No seqs: nothing is raised. Arguments
        are validated by the caller.
        """
        ...
