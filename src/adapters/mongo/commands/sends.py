"""Commands on send claims: the seq recorded per client_msg_id (collection ``seq_send``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from imbucket.adapters.mongo.commands.shapes import Doc, InsertMany, Update

SENT_SEQ_FIELDS: Doc = {"_id": 0, "client_msg_id": 1, "seq": 1}
# The seq of a claim whose sender has not allocated yet (seqs start at 1).
UNALLOCATED = 0


def claim_sends(
    conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
) -> InsertMany:
    """One document per claim; the unique index refuses a client_msg_id claimed before.

    Unordered, so every new claim lands whatever its neighbours' duplicates. claimed_at is
    at (epoch ms); with a retention window (at - since), expire_at is when the TTL index on
    it may delete the claim (a document without expire_at never expires).
    """
    times = claim_times(at, since)
    documents = [
        {"conversation_id": conversation_id, "client_msg_id": cid, "seq": seq, **times}
        for cid, seq in sorted(claims.items())
    ]
    return InsertMany(documents, ordered=False)


def claim_pending(
    conversation_id: str, client_msg_ids: Sequence[str], owner: str, at: int, since: int
) -> InsertMany:
    """One pending claim (seq UNALLOCATED) per client_msg_id, owned by owner; see claim_sends."""
    times = claim_times(at, since)
    documents = [
        {
            "conversation_id": conversation_id,
            "client_msg_id": cid,
            "seq": UNALLOCATED,
            "owner": owner,
            **times,
        }
        for cid in sorted(client_msg_ids)
    ]
    return InsertMany(documents, ordered=False)


def take_over(
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
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "$or": [{"claimed_at": {"$lt": _date(since)}}, stale],
            },
            {"$set": {"seq": UNALLOCATED, "owner": owner, **times}},
        )
        for cid in sorted(client_msg_ids)
    ]


def record_seqs(conversation_id: str, seqs: Mapping[str, int], owner: str) -> list[Update]:
    """Write the seq of each pending claim owner still holds (a compare-and-set)."""
    return [
        Update(
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "owner": owner,
                "seq": UNALLOCATED,
            },
            {"$set": {"seq": seq}},
        )
        for cid, seq in sorted(seqs.items())
    ]


def pending_of(conversation_id: str, client_msg_ids: Iterable[str], owner: str) -> Doc:
    """Filter of owner's claims of client_msg_ids still pending (to delete them again)."""
    return {
        "conversation_id": conversation_id,
        "client_msg_id": {"$in": list(client_msg_ids)},
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
    conversation_id: str, claims: Mapping[str, int], at: int, since: int
) -> list[Update]:
    """For client_msg_ids claimed before: replace the claim only if it expired before since."""
    times = claim_times(at, since)
    return [
        Update(
            {
                "conversation_id": conversation_id,
                "client_msg_id": cid,
                "claimed_at": {"$lt": _date(since)},
            },
            {"$set": {"seq": seq, **times}},
        )
        for cid, seq in sorted(claims.items())
    ]


def sends_in(conversation_id: str, client_msg_ids: Iterable[str], since: int = 0) -> Doc:
    """Filter of the live claims of client_msg_ids (find with SENT_SEQ_FIELDS)."""
    found: Doc = {
        "conversation_id": conversation_id,
        "client_msg_id": {"$in": list(client_msg_ids)},
    }
    if since:
        found["claimed_at"] = {"$gte": _date(since)}
    return found


def claims_before(before: int) -> Doc:
    """Filter of the claims recorded before before (epoch ms)."""
    return {"claimed_at": {"$lt": _date(before)}}


def _date(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
