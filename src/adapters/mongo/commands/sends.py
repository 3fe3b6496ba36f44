r"""Commands on send claims: the seq recorded per client_msg_id, in the data collection.

A claim is a document of the store's data collection (``msg`` or ``msg_row``), keyed by that
collection's unique key (``ClaimDocs``), so that the record of its seq can be one more
statement of the command that stores its message (``claim_records``): no command before
MongoDB 8.0 writes two collections.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from imbucket.adapters.mongo.commands.shapes import ROWS, Doc, InsertMany, Update

# The seq of a claim whose sender has not allocated yet (seqs start at 1).
UNALLOCATED = 0

# Between a conversation id and a client_msg_id in a claim's doc_id: below every character an
# id may hold (ids never hold control characters), and apart from the user documents' \x1f.
CLAIM_SEPARATOR = "\x1e"


@dataclass(frozen=True, slots=True)
class ClaimDocs:
    r"""Where a backend keeps its send claims: its data collection, by its unique key.

    In ``msg`` ``doc_id: "<conv>\x1e<client_msg_id>"`` (no bucket's, spilled deleter's or user
    document's doc_id holds \x1e), in ``msg_row`` ``_id: {c: <conv>, m: <client_msg_id>}`` (a
    row's is ``{c, s}``, a user document's ``{c, u}``). A claim sorts, and shards, with its
    conversation's data, and its key makes it unique: a second claim of one client_msg_id
    is a duplicate key. Only claims hold ``claimed_at`` (``ONLY``).
    """

    collection: str

    # Filter of the claims alone: no data or user document has claimed_at.
    ONLY: ClassVar[Doc] = {"claimed_at": {"$exists": True}}

    @property
    def key_field(self) -> str:
        """The collection's unique key: ``_id`` of rows, ``doc_id`` of buckets."""
        return "_id" if self.collection == ROWS else "doc_id"

    @property
    def fields(self) -> Doc:
        """Projection of a claim's key and seq (what ``seq_of`` reads)."""
        if self.collection == ROWS:
            return {"_id": 1, "seq": 1}
        return {"_id": 0, "doc_id": 1, "seq": 1}

    def key(self, conversation_id: str, client_msg_id: str) -> Doc:
        """Filter of one claim."""
        if self.collection == ROWS:
            return {"_id": {"c": conversation_id, "m": client_msg_id}}
        return {"doc_id": f"{conversation_id}{CLAIM_SEPARATOR}{client_msg_id}"}

    def keys_in(self, conversation_id: str, client_msg_ids: Iterable[str]) -> Doc:
        """Filter of the claims of several client_msg_ids of a conversation."""
        values = [self.key(conversation_id, cid)[self.key_field] for cid in client_msg_ids]
        return {self.key_field: {"$in": values}}

    def owner(self, document: Doc) -> tuple[str, str]:
        """(conversation_id, client_msg_id) of a claim, from its key."""
        key = document[self.key_field]
        if self.collection == ROWS:
            return key["c"], key["m"]
        conversation_id, client_msg_id = key.split(CLAIM_SEPARATOR)
        return conversation_id, client_msg_id

    def seq_of(self, found: Iterable[Doc]) -> dict[str, int]:
        """Recorded seq by client_msg_id, from the claims found (pending ones left out)."""
        return {self.owner(doc)[1]: int(doc["seq"]) for doc in found if int(doc["seq"]) > 0}


def claim_sends(
    claims: ClaimDocs,
    conversation_id: str,
    seqs: Mapping[str, int],
    at: int = 0,
    since: int = 0,
) -> InsertMany:
    """One document per claim; the unique key refuses a client_msg_id claimed before.

    Unordered, so every new claim lands whatever its neighbours' duplicates. claimed_at is
    at (epoch ms); with a retention window (at - since), expire_at is when the TTL index on
    it may delete the claim (a document without expire_at never expires).
    """
    return _claim_documents(claims, conversation_id, seqs, claim_times(at, since))


def claim_pending(
    claims: ClaimDocs,
    conversation_id: str,
    client_msg_ids: Sequence[str],
    owner: str,
    at: int,
    since: int,
) -> InsertMany:
    """One pending claim (seq UNALLOCATED) per client_msg_id, owned by owner; see claim_sends."""
    times = {"owner": owner, **claim_times(at, since)}
    pending = dict.fromkeys(client_msg_ids, UNALLOCATED)
    return _claim_documents(claims, conversation_id, pending, times)


def _claim_documents(
    claims: ClaimDocs, conversation_id: str, seqs: Mapping[str, int], fields: Mapping[str, object]
) -> InsertMany:
    """An unordered insert of one claim per client_msg_id at its seq, with fields besides."""
    documents = [
        {**claims.key(conversation_id, cid), "seq": seq, **fields}
        for cid, seq in sorted(seqs.items())
    ]
    return InsertMany(documents, ordered=False)


def take_over(
    claims: ClaimDocs,
    conversation_id: str,
    client_msg_ids: Sequence[str],
    owner: str,
    at: int,
    since: int,
    stale_before: int,
) -> list[Update]:
    """For client_msg_ids claimed before: owner's pending claim where the claim is dead.

    Dead: expired before since, or still pending since before stale_before (its sender
    died before recording a seq).
    """
    times = claim_times(at, since)
    stale = {"seq": UNALLOCATED, "claimed_at": {"$lt": _date(stale_before)}}
    return [
        Update(
            {
                **claims.key(conversation_id, cid),
                "$or": [{"claimed_at": {"$lt": _date(since)}}, stale],
            },
            {"$set": {"seq": UNALLOCATED, "owner": owner, **times}},
        )
        for cid in sorted(client_msg_ids)
    ]


def record_seqs(
    claims: ClaimDocs, conversation_id: str, seqs: Mapping[str, int], owner: str
) -> list[Update]:
    """Write the seq of each pending claim owner still holds (a compare-and-set)."""
    return [
        Update(
            {**claims.key(conversation_id, cid), "owner": owner, "seq": UNALLOCATED},
            {"$set": {"seq": seq}},
        )
        for cid, seq in sorted(seqs.items())
    ]


def claim_records(
    claims: ClaimDocs,
    conversation_id: str,
    seqs: Mapping[str, int],
    owner: str,
    at: int,
    since: int,
) -> list[Update]:
    """``record_seqs`` as upserts that collide where the claim is no longer owner's pending one.

    In an ordered command they lead the messages' write: a claim taken over meanwhile (its
    sender outlived the lease) makes its upsert insert a second document with the claim's
    key, a duplicate key error that stops the command before any message is written. A
    claim gone (expired and deleted) is written again as recorded, with its claim time.
    """
    times = claim_times(at, since)
    return [
        Update(
            {**claims.key(conversation_id, cid), "owner": owner, "seq": UNALLOCATED},
            {"$set": {"seq": seq}, "$setOnInsert": times},
            upsert=True,
        )
        for cid, seq in seqs.items()
    ]


def pending_of(
    claims: ClaimDocs, conversation_id: str, client_msg_ids: Iterable[str], owner: str
) -> Doc:
    """Filter of owner's claims of client_msg_ids still pending (to delete them again)."""
    return {
        **claims.keys_in(conversation_id, client_msg_ids),
        "owner": owner,
        "seq": UNALLOCATED,
    }


def claim_times(at: int, since: int) -> Doc:
    """claimed_at and, when there is a retention window, expire_at, as BSON dates."""
    times: Doc = {"claimed_at": _date(at)}
    if since:
        times["expire_at"] = _date(at + (at - since))
    return times


def replace_expired(
    claims: ClaimDocs, conversation_id: str, seqs: Mapping[str, int], at: int, since: int
) -> list[Update]:
    """For client_msg_ids claimed before: replace the claim only if it expired before since."""
    times = claim_times(at, since)
    return [
        Update(
            {**claims.key(conversation_id, cid), "claimed_at": {"$lt": _date(since)}},
            {"$set": {"seq": seq, **times}},
        )
        for cid, seq in sorted(seqs.items())
    ]


def sends_in(
    claims: ClaimDocs, conversation_id: str, client_msg_ids: Iterable[str], since: int = 0
) -> Doc:
    """Filter of the live claims of client_msg_ids (find with ``claims.fields``)."""
    found = claims.keys_in(conversation_id, client_msg_ids)
    if since:
        found["claimed_at"] = {"$gte": _date(since)}
    return found


def claims_before(before: int) -> Doc:
    """Filter of the claims recorded before before (epoch ms); only claims have claimed_at."""
    return {"claimed_at": {"$lt": _date(before)}}


def claim_footprint() -> list[Doc]:
    """One aggregate: the number of claims and their BSON bytes (the claims' index serves it)."""
    return [
        {"$match": ClaimDocs.ONLY},
        {
            "$group": {
                "_id": None,
                "claims": {"$sum": 1},
                "bytes": {"$sum": {"$bsonSize": "$$ROOT"}},
            }
        },
    ]


def _date(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
