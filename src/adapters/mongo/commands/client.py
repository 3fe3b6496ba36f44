"""The client options and the indexes of every collection the adapters create."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from imbucket.adapters.mongo.commands.shapes import BUCKETS, ROWS, SENDS, SEQS, Doc, IndexSpec
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
    # Claims expire by themselves: the TTL monitor deletes each once its expire_at is past.
    SENDS: (
        IndexSpec((("conversation_id", 1), ("client_msg_id", 1))),
        IndexSpec((("expire_at", 1),), unique=False, expire_after_seconds=0),
    ),
}

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
