"""Streaming scans (migrate, verify): a collection in key order, a page at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imbucket.adapters.mongo.commands.counters import UserDocs
from imbucket.adapters.mongo.commands.sends import ClaimDocs
from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, SEQS, Doc


@dataclass(frozen=True, slots=True)
class Find:
    """A find: ``collection.find(filter, projection).sort(sort).limit(limit)``."""

    filter: Doc
    projection: Doc | None
    sort: list[tuple[str, int]]
    limit: int


# The key each scanned collection is read in order of: its unique index, or for rows the
# fields of _id (sorted by _id itself, whose order is (c, s): the filter names the fields
# because not every server compares embedded documents with $gt). USERS_IN: the user
# documents kept in a data collection (``UserDocs``), by their keys; CLAIMS_IN: its send
# claims (``ClaimDocs``), by theirs (in (conversation_id, client_msg_id) order).
SCAN_KEYS: Mapping[str, tuple[str, ...]] = {
    BUCKETS: ("doc_id",),
    ROWS: ("_id.c", "_id.s"),
    SEQS: ("conversation_id",),
}
USERS_IN = "users in "  # + the data collection: a scan of its user documents
SCAN_KEYS_OF_USERS: Mapping[str, tuple[str, ...]] = {BUCKETS: ("doc_id",), ROWS: ("_id.c", "_id.u")}
CLAIMS_IN = "claims in "  # + the data collection: a scan of its send claims
SCAN_KEYS_OF_CLAIMS: Mapping[str, tuple[str, ...]] = {
    BUCKETS: ("doc_id",),
    ROWS: ("_id.c", "_id.m"),
}

# Filters keeping a data collection's own documents, not the user documents it also holds.
DATA_ONLY: Mapping[str, Doc] = {
    BUCKETS: {"msgs": {"$exists": True}},
    ROWS: {"_id.s": {"$exists": True}},
}


def _scan_keys(scanned: str) -> tuple[str, ...]:
    if scanned.startswith(USERS_IN):
        return SCAN_KEYS_OF_USERS[scanned.removeprefix(USERS_IN)]
    if scanned.startswith(CLAIMS_IN):
        return SCAN_KEYS_OF_CLAIMS[scanned.removeprefix(CLAIMS_IN)]
    return SCAN_KEYS[scanned]


def scanned_collection(scanned: str) -> str:
    """The collection a scan reads: scanned without its ``USERS_IN`` or ``CLAIMS_IN``."""
    return scanned.removeprefix(USERS_IN).removeprefix(CLAIMS_IN)


def after_key(names: Sequence[str], values: Sequence[Any] | None) -> Doc:
    """Filter of the documents whose key (fields ``names``, in order) sorts after ``values``."""
    if values is None:
        return {}
    clauses = []
    for position, name in enumerate(names):
        clause: Doc = dict(zip(names[:position], values[:position], strict=True))
        clause[name] = {"$gt": values[position]}
        clauses.append(clause)
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def scan(scanned: str, after: Sequence[Any] | None, limit: int) -> Find:
    """The next ``limit`` documents in key order after key ``after``.

    scanned: a collection, or ``USERS_IN`` / ``CLAIMS_IN`` + a data collection for its user
    documents / send claims.
    """
    names = _scan_keys(scanned)
    collection = scanned_collection(scanned)
    where = after_key(names, after)
    if scanned.startswith(USERS_IN):
        only = UserDocs.ONLY
    elif scanned.startswith(CLAIMS_IN):
        only = ClaimDocs.ONLY
    else:
        only = DATA_ONLY.get(collection, {})
    if only:
        where = {"$and": [only, where]} if where else dict(only)
    if collection == ROWS:
        return Find(where, None, [("_id", 1)], limit)
    return Find(where, {"_id": 0}, [(name, 1) for name in names], limit)


def key_of(document: Doc, scanned: str) -> list[Any]:
    """The scan key of a document of scanned (dotted names reach into _id)."""
    values = []
    for name in _scan_keys(scanned):
        value: Any = document
        for part in name.split("."):
            value = value[part]
        values.append(value)
    return values
