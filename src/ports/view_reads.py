"""The ViewReads port: what one viewer's pull reads, watermarks and slots together."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from imbucket.domain.model import Pick, Slot, Watermarks

View = tuple[Watermarks, dict[int, Slot]]


@runtime_checkable
class ViewReads(Protocol):
    """A pull's reads: the viewer's watermarks and the slots they let it see.

    Backends whose store and seq store live on one engine answer both in one round trip
    (one statement, command or pipeline; one more only when a slot read has spilled
    deleters). A backend without it is served by ``imbucket.app.views.SeparateViews``: two round
    trips, the same answers. Behind a cache, ``adapters.cached_views.CachedViews`` answers a
    fully cached pull in one cache round trip and no store round trip.
    """

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """The viewer's watermarks and the viewer-scoped slots of ``pick.of(marks)``.

        ``marks`` equals ``SeqStore.watermarks(conversation_id, viewer_id)``; the slots are
        what ``MessageStore.get(conversation_id, pick.of(marks), viewer_id)`` returns (only
        seqs holding something, no deleter list: ``deleted_by`` is the viewer or
        ``OTHER_DELETERS``). No slot outside ``pick.of(marks)`` is returned. Arguments are
        validated by the caller.
        """
        ...
