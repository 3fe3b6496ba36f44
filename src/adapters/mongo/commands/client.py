"""The client options and the indexes of every collection the adapters create."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, SEQS, Doc, IndexSpec
from imbucket.adapters.timeouts import Timeouts, millis

DEFAULT_URL = "mongodb://127.0.0.1:27017/imbucket"
DEFAULT_DATABASE = "imbucket"
CLIENT_DEFAULTS: Mapping[str, Any] = {"appname": "imbucket"}

# Unique keys only: nothing inside the msgs array is indexed (as in OpenIM), and rows are
# addressed by _id alone. Spilled deleters are documents of ``msg`` keyed by doc_id
# (spill_key): the doc_id index makes their insert a set-add and serves reads by slot as a
# range, and keeps them beside their bucket.
INDEXES: Mapping[str, tuple[IndexSpec, ...]] = {
    BUCKETS: (IndexSpec((("doc_id", 1),)),),
    ROWS: (),
    SEQS: (IndexSpec((("conversation_id", 1),)),),
}

# The send claims' own indexes in the data collection that keeps them (``ClaimDocs``), whose
# unique key makes them unique. Sparse: only claims hold these fields, so no bucket or row
# has an entry. The claim time serves pruning and the claims' count; the TTL index deletes
# each claim by itself once its expire_at is past.
CLAIM_INDEXES: tuple[IndexSpec, ...] = (
    IndexSpec((("claimed_at", 1),), unique=False, sparse=True),
    IndexSpec((("expire_at", 1),), unique=False, expire_after_seconds=0, sparse=True),
)

STORAGE_STATS: list[Doc] = [{"$collStats": {"storageStats": {}}}]


def client_options(url: str, timeouts: Timeouts | None = None) -> Doc:
    """CLIENT_DEFAULTS and the bounds of every wait, except what the URL sets (the URL wins).

    An unreachable or silent server fails a call within seconds, not pymongo's 30 s or never:
    server selection and connecting within ``connect``, a reply within ``statement`` (the
    socket timeout), a pooled connection within ``pool``. pymongo retries a read or write
    once, so a call waits at most 2 x (connect + pool + connect + statement).
    """
    bounds = timeouts or Timeouts()
    options = {
        **CLIENT_DEFAULTS,
        "serverSelectionTimeoutMS": millis(bounds.connect),
        "connectTimeoutMS": millis(bounds.connect),
        "socketTimeoutMS": millis(bounds.statement),
        "waitQueueTimeoutMS": millis(bounds.pool),
    }
    query = url.partition("?")[2]
    given = {part.partition("=")[0].lower() for part in query.split("&") if part}
    return {name: value for name, value in options.items() if name.lower() not in given}
