"""What a write may have left stale in a read cache, in a form a store can keep.

A writer whose cache invalidation could not be delivered records it with the store's data
(``ports.invalidation_log``); every cached reader replays what it finds there into the cache
before serving, so a cut-off writer leaves stale entries for a bounded time only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Invalidation:
    """The cached entries of one conversation that one write may have changed.

    ``seqs``: slot entries; ``watermarks``: the conversation's part of every viewer's
    watermarks (max_seq, min_seq); ``floors``: the users whose own floor (clear_history) moved.
    """

    conversation_id: str
    seqs: tuple[int, ...] = ()
    watermarks: bool = False
    floors: tuple[str, ...] = ()

    def encode(self) -> str:
        """The entries as compact JSON text (the conversation id is stored beside it)."""
        body: dict[str, object] = {}
        if self.seqs:
            body["s"] = list(self.seqs)
        if self.watermarks:
            body["w"] = 1
        if self.floors:
            body["f"] = list(self.floors)
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def decode(cls, conversation_id: str, text: str) -> Invalidation:
        """The invalidation ``encode`` wrote; ValueError for text it did not write."""
        body = json.loads(text)
        if not isinstance(body, dict):
            raise ValueError(f"not an encoded invalidation: {text!r}")
        seqs = body.get("s", [])
        floors = body.get("f", [])
        if not all(isinstance(seq, int) and not isinstance(seq, bool) for seq in seqs):
            raise ValueError(f"not an encoded invalidation: {text!r}")
        if not all(isinstance(user, str) for user in floors):
            raise ValueError(f"not an encoded invalidation: {text!r}")
        return cls(conversation_id, tuple(seqs), bool(body.get("w")), tuple(floors))


def decoded(conversation_id: str, text: str) -> Invalidation:
    """``Invalidation.decode``, or an invalidation naming nothing for text it did not write."""
    try:
        return Invalidation.decode(conversation_id, text)
    except ValueError:
        return Invalidation(conversation_id)


def merged(invalidations: Iterable[Invalidation]) -> list[Invalidation]:
    """One invalidation per conversation covering all of its entries, in first-seen order."""
    seqs: dict[str, dict[int, None]] = {}
    watermarks: dict[str, bool] = {}
    floors: dict[str, dict[str, None]] = {}
    for entry in invalidations:
        key = entry.conversation_id
        seqs.setdefault(key, {}).update(dict.fromkeys(entry.seqs))
        watermarks[key] = watermarks.get(key, False) or entry.watermarks
        floors.setdefault(key, {}).update(dict.fromkeys(entry.floors))
    return [
        Invalidation(key, tuple(seqs[key]), watermarks[key], tuple(floors[key])) for key in seqs
    ]
