"""The shapes every command takes: documents, updates, finds-and-updates, inserts.

Also the collection names and the update-document helpers the bucket and row commands share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imbucket.adapters.codec import slot_to_doc
from imbucket.domain.model import EMPTY_SLOT, SlotPatch

Doc = dict[str, Any]

BUCKETS = "msg"
ROWS = "msg_row"
SEQS = "seq"
META = "meta"


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: its key pattern and whether it is unique."""

    keys: tuple[tuple[str, int], ...]
    unique: bool = True
    expire_after_seconds: int | None = None  # a TTL index
    sparse: bool = False  # entries only for the documents holding the keys

    @property
    def name(self) -> str:
        """The name MongoDB gives the index: ``<field>_<direction>`` joined by ``_``."""
        return "_".join(f"{field}_{direction}" for field, direction in self.keys)


@dataclass(frozen=True, slots=True)
class Update:
    """``update_one(filter, update, upsert=upsert)``, alone or as a bulk_write UpdateOne."""

    filter: Doc
    update: Doc
    upsert: bool = False


@dataclass(frozen=True, slots=True)
class FindAndUpdate:
    """``find_one_and_update(filter, update, projection, upsert, return the new document)``."""

    filter: Doc
    update: Doc
    projection: Doc = field(default_factory=dict)
    upsert: bool = True
    return_new: bool = True


@dataclass(frozen=True, slots=True)
class InsertMany:
    """``insert_many(documents, ordered=ordered)``."""

    documents: list[Doc]
    ordered: bool = False


def count_group(
    is_user: Doc, messages: Doc, not_data: Doc | None = None, **extra: Doc
) -> list[Doc]:
    """One ``$group`` counting messages and the user documents (and their bytes) apart.

    The user documents (``UserDocs``) and send claims (``ClaimDocs``), both marked by
    is_user, share the data collection's storage statistics; the footprint reported is the
    data's, so ``replies.store_stats`` takes them out again. not_data (default: is_user)
    marks every document that is no bucket or row, those and spilled deleters: none is
    counted as a document, but spilled deleters are data, so their bytes stay.
    """
    user_bytes = {"$cond": [is_user, {"$bsonSize": "$$ROOT"}, 0]}
    return [
        {
            "$group": {
                "_id": None,
                "messages": {"$sum": messages},
                "aside_docs": {"$sum": {"$cond": [not_data or is_user, 1, 0]}},
                "user_bytes": {"$sum": user_bytes},
                **extra,
            }
        }
    ]


def tag_ops(patch: SlotPatch, prefix: str) -> tuple[Doc, Doc]:
    """($set, $addToSet) of a non-purge patch on the slot fields under prefix."""
    sets: Doc = {f"{prefix}is_read": True} if patch.set_read else {}
    if patch.mark_spilled:
        sets[f"{prefix}spilled"] = True
    adds: Doc = {}
    if patch.add_deleted_by is not None:
        adds[f"{prefix}del_list"] = patch.add_deleted_by
    if patch.add_read_by is not None:
        adds[f"{prefix}read_by"] = patch.add_read_by
    return sets, adds


def upsert_ops(sets: Doc, adds: Doc) -> Doc:
    """The $set and $addToSet, plus $setOnInsert of every other slot key (a complete row)."""
    touched = set(sets) | set(adds)
    defaults = {k: v for k, v in slot_to_doc(EMPTY_SLOT).items() if k not in touched}
    return operators(sets, adds, defaults)


def operators(sets: Doc, adds: Doc, on_insert: Doc | None = None) -> Doc:
    """An update document without empty operators (MongoDB rejects ``{"$set": {}}``)."""
    parts = {"$set": sets, "$addToSet": adds, "$setOnInsert": on_insert or {}}
    return {name: value for name, value in parts.items() if value}
