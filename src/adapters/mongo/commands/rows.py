"""Commands on rows (collection ``msg_row``): one document per message, keyed by ``{c, s}``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from imbucket.adapters.codec import message_to_doc, revoke_to_doc, slot_to_doc
from imbucket.adapters.mongo.commands.buckets import free_slot, viewed_deleters
from imbucket.adapters.mongo.commands.shapes import Doc, Update, count_group, tag_ops, upsert_ops
from imbucket.domain.model import PURGED_SLOT, Message, Revoke, SlotPatch

# The first server version that can cluster a collection on _id.
CLUSTERED_SINCE = (5, 3)


def row_id(conversation_id: str, seq: int) -> Doc:
    """The _id of a row; field order matters for equality, so it is always c then s."""
    return {"c": conversation_id, "s": seq}


def rows_in(conversation_id: str, seqs: Iterable[int]) -> Doc:
    """Filter of the rows of seqs: one find per call."""
    return {"_id": {"$in": [row_id(conversation_id, seq) for seq in seqs]}}


def viewed_rows(conversation_id: str, seqs: Iterable[int], viewer: str) -> list[Doc]:
    """Aggregate: the rows of seqs with ``del_list`` as viewer reads it (one round trip)."""
    scoped = {"del_list": viewed_deleters("$del_list", viewer)}
    return [{"$match": rows_in(conversation_id, seqs)}, {"$addFields": scoped}]


def fill_row(conversation_id: str, message: Message) -> Update:
    """Store a message in a row that holds only tags (or create the row), iff it is free."""
    condition = {"_id": row_id(conversation_id, message.seq), **free_slot()}
    return Update(condition, upsert_ops({"msg": message_to_doc(message)}, {}), upsert=True)


def revoke_row(conversation_id: str, seq: int, revoke: Revoke) -> Update:
    """Set a row's revoke (creating the row) iff it is neither revoked nor purged.

    An existing row that fails the condition makes the upsert collide on _id: the caller
    gets a duplicate-key error for "already revoked or purged".
    """
    condition = {
        "_id": row_id(conversation_id, seq),
        "revoke": {"$type": "null"},
        "purged": {"$ne": True},
    }
    return Update(condition, upsert_ops({"revoke": revoke_to_doc(revoke)}, {}), upsert=True)


def patch_row(conversation_id: str, seq: int, patch: SlotPatch) -> Update:
    """Tag changes of one row as an upsert, so tags written before the message are kept."""
    if patch.purge:
        update: Doc = {"$set": slot_to_doc(PURGED_SLOT)}
    else:
        update = upsert_ops(*tag_ops(patch, ""))
    return Update({"_id": row_id(conversation_id, seq)}, update, upsert=True)


def row_collection_options(server_version: Sequence[int]) -> Doc:
    """create_collection options: clustered on _id from MongoDB 5.3, plain before."""
    if tuple(server_version[:2]) >= CLUSTERED_SINCE:
        return {"clusteredIndex": {"key": {"_id": 1}, "unique": True}}
    return {}


# User documents ({c, u}) and send claims ({c, m}): kept in msg_row, but no rows.
_IS_USER_ROW = {
    "$or": [
        {"$ne": [{"$type": "$_id.u"}, "missing"]},
        {"$ne": [{"$type": "$_id.m"}, "missing"]},
    ]
}
COUNT_ROW_MESSAGES = count_group(
    _IS_USER_ROW,
    {"$cond": [{"$eq": [{"$type": "$msg"}, "object"]}, 1, 0]},
    key_bytes={"$sum": {"$cond": [_IS_USER_ROW, 0, {"$bsonSize": "$_id"}]}},
)
