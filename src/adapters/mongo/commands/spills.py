"""Commands on spilled deleters: documents of ``msg`` beside their bucket (see SPILL_SEPARATOR)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imbucket.adapters.mongo.commands.buckets import patch_bucket
from imbucket.adapters.mongo.commands.shapes import Doc, InsertMany, Update
from imbucket.domain.budget import TagBudget
from imbucket.domain.model import SlotPatch

# A spilled deleter is a document of ``msg``: ``{doc_id: "<doc_id>\x1f<slot>\x1f<user_id>"}``.
# Ids never hold control characters (imbucket.domain.validation.check_id), so the separator
# sorts below every character of an id: the deleters of one slot are exactly the doc_ids in
# [prefix, prefix with "\x1f" → "\x20"), beside their bucket and apart from its user documents
# (``UserDocs``: one separator, not two). In ``msg`` and not a collection of its own, so the
# first spill of a slot is one ``update`` command with the patch flagging it
# (``flagging_patch``); no command writes two collections.
SPILL_SEPARATOR = "\x1f"
_AFTER_SEPARATOR = chr(ord(SPILL_SEPARATOR) + 1)


def spill_key(doc_id: str, slot: int, user_id: str) -> str:
    """The doc_id of one spilled deleter (see SPILL_SEPARATOR)."""
    return f"{spill_prefix(doc_id, slot)}{user_id}"


def spill_prefix(doc_id: str, slot: int) -> str:
    """The doc_id prefix every spilled deleter of (doc_id, slot) starts with."""
    return f"{doc_id}{SPILL_SEPARATOR}{slot}{SPILL_SEPARATOR}"


def spill_entry(key: str) -> tuple[str, int, str]:
    """(doc_id, slot, user_id) of a spilled deleter's doc_id."""
    doc_id, slot, user_id = key.split(SPILL_SEPARATOR, 2)
    return doc_id, int(slot), user_id


def spill_documents(entries: Sequence[tuple[str, int, str]]) -> InsertMany:
    """Spilled deleters as documents; a repeated doc_id is a reported duplicate (a set-add)."""
    documents = [{"doc_id": spill_key(d, i, u)} for d, i, u in entries]
    return InsertMany(documents, ordered=False)


def spill_upserts(entries: Sequence[tuple[str, int, str]]) -> list[Update]:
    """Spilled deleters as upserts, to follow ``flagging_patch`` in its ordered command."""
    keys = [spill_key(d, i, u) for d, i, u in entries]
    return [Update({"doc_id": key}, {"$setOnInsert": {"doc_id": key}}, upsert=True) for key in keys]


def flagging_patch(
    doc_id: str, patches: Mapping[int, SlotPatch], budget: TagBudget | None = None
) -> Update | None:
    """``patch_bucket`` as a guard: an upsert that collides on doc_id when refused.

    Refused (a target slot purged), the upsert inserts a new document with the bucket's
    doc_id, which the unique index refuses: a write error, which stops an ordered command
    before the spilled deleters that follow it (``spill_upserts``). None when the patch has
    budget conditions: an upsert's filter may not hold ``$expr`` (code 224).
    """
    command = patch_bucket(doc_id, patches, budget)
    if "$expr" in command.filter:
        return None
    return Update(command.filter, command.update, upsert=True)


def spilled_in(wanted: Mapping[str, Sequence[int]]) -> Doc:
    """Filter of the spilled deleters of the given slots (find or delete_many): doc_id ranges."""
    branches = [
        {"doc_id": {"$gte": prefix, "$lt": prefix[:-1] + _AFTER_SEPARATOR}}
        for doc_id, indexes in wanted.items()
        for prefix in (spill_prefix(doc_id, index) for index in indexes)
    ]
    return branches[0] if len(branches) == 1 else {"$or": branches}


def spilled_by(wanted: Mapping[str, Sequence[int]], viewer: str) -> Doc:
    """Filter of viewer's own spilled entries in the given slots: exact doc_ids, no range."""
    keys = [
        spill_key(doc_id, index, viewer) for doc_id, indexes in wanted.items() for index in indexes
    ]
    return {"doc_id": {"$in": keys}}


SPILLED_FIELDS: Doc = {"_id": 0, "doc_id": 1}
