"""Streaming scans (migrate, verify): a collection in key order, a page at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imbucket.adapters.mongo.commands.counters import UserDocs
from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, SENDS, SEQS, Doc


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
# documents kept in a data collection (``UserDocs``), by their keys.
SCAN_KEYS: Mapping[str, tuple[str, ...]] = {
    BUCKETS: ("doc_id",),
    ROWS: ("_id.c", "_id.s"),
    SEQS: ("conversation_id",),
    SENDS: ("conversation_id", "client_msg_id"),
}
USERS_IN = "users in "  # + the data collection: a scan of its user documents
SCAN_KEYS_OF_USERS: Mapping[str, tuple[str, ...]] = {BUCKETS: ("doc_id",), ROWS: ("_id.c", "_id.u")}

# Filters keeping a data collection's own documents, not the user documents it also holds.
DATA_ONLY: Mapping[str, Doc] = {
    BUCKETS: {"msgs": {"$exists": True}},
    ROWS: {"_id.s": {"$exists": True}},
}


def _scan_keys(scanned: str) -> tuple[str, ...]:
    if scanned.startswith(USERS_IN):
        return SCAN_KEYS_OF_USERS[scanned.removeprefix(USERS_IN)]
    return SCAN_KEYS[scanned]


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

    scanned: a collection, or ``USERS_IN`` + a data collection for its user documents.
    """
    names = _scan_keys(scanned)
    collection = scanned.removeprefix(USERS_IN)
    where = after_key(names, after)
    if scanned.startswith(USERS_IN):
        where = {"$and": [UserDocs.ONLY, where]} if where else dict(UserDocs.ONLY)
    elif collection in DATA_ONLY:
        where = {"$and": [DATA_ONLY[collection], where]} if where else dict(DATA_ONLY[collection])
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
