"""Commands on the seq counters: a conversation's in ``seq``, a user's in the data collection."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from imbucket.adapters.mongo.commands.shapes import ROWS, SEQS, Doc, FindAndUpdate, Update

# The counters of a conversation's and of a user's document; a new document gets 0 in those
# not being raised, so every user document holds both (``UserDocs.ONLY`` relies on it).
CONVERSATION_COUNTERS = ("max_seq", "min_seq")
USER_COUNTERS = ("min_seq", "read_seq")


def allocate(conversation_id: str, n: int) -> FindAndUpdate:
    """Reserve n seqs: ``$inc`` max_seq, creating the counter on first use."""
    return FindAndUpdate(
        {"conversation_id": conversation_id},
        {"$inc": {"max_seq": n}, "$setOnInsert": {"min_seq": 0}},
        {"_id": 0, "max_seq": 1},
    )


def conversation_seqs(conversation_id: str) -> Doc:
    """Filter of a conversation's counter document."""
    return {"conversation_id": conversation_id}


# Between a conversation id and a user id in a user document's key; ids never hold control
# characters (imbucket.domain.validation.check_id), so the key sorts as (conversation_id,
# user_id) does.
USER_SEPARATOR = "\x1f"


@dataclass(frozen=True, slots=True)
class UserDocs:
    r"""Where a backend keeps its per-user watermarks (min_seq, read_seq): its data collection.

    ``collection`` is ``msg`` or ``msg_row``. A user's document is keyed by that collection's
    own unique key, built from (conversation_id, user_id) so that it sorts, and shards, with
    the conversation's data: in ``msg`` ``doc_id: "<conv>\x1f<user>"`` (no bucket's doc_id
    holds a control character), in ``msg_row`` ``_id: {c: <conv>, u: <user>}`` (a row's is
    ``{c, s}``). In the collection of the tags, a mark-read's read-seq raise is one more
    update of the tag write's own ``update`` command (a tag write is held to two round
    trips): no command before MongoDB 8.0 writes two collections. OpenIM keeps them in ``seq_user``.
    """

    collection: str

    # Filter of the user documents alone: each holds both USER_COUNTERS, no data document any.
    ONLY: ClassVar[Doc] = {"read_seq": {"$exists": True}}

    @property
    def key_field(self) -> str:
        """The collection's unique key: ``_id`` of rows, ``doc_id`` of buckets."""
        return "_id" if self.collection == ROWS else "doc_id"

    def key(self, conversation_id: str, user_id: str) -> Doc:
        """Filter of one user's document."""
        if self.collection == ROWS:
            return {"_id": {"c": conversation_id, "u": user_id}}
        return {"doc_id": f"{conversation_id}{USER_SEPARATOR}{user_id}"}

    def keys_in(self, keys: Iterable[tuple[str, str]]) -> Doc:
        """Filter of the documents of several (conversation_id, user_id)."""
        values = [self.key(c, u)[self.key_field] for c, u in keys]
        return {self.key_field: {"$in": values}}

    def owner(self, document: Doc) -> tuple[str, str]:
        """(conversation_id, user_id) of a user document, from its key."""
        key = document[self.key_field]
        if self.collection == ROWS:
            return key["c"], key["u"]
        conversation_id, user_id = key.split(USER_SEPARATOR)
        return conversation_id, user_id


def raise_to(key: Doc, name: str, value: int, counters: Sequence[str]) -> FindAndUpdate:
    """Raise counter name to at least value (``$max``: never down), creating the document.

    counters: all of the document's (CONVERSATION_COUNTERS or USER_COUNTERS).
    """
    others = {other: 0 for other in counters if other != name}
    update = {"$max": {name: value}, "$setOnInsert": others}
    return FindAndUpdate(dict(key), update, {"_id": 0, name: 1})


def raise_read_seq(users: UserDocs, conversation_id: str, user_id: str, seq: int) -> Update:
    """``raise_to`` of a read seq as an upsert, to ride on a tag write's bulk write."""
    command = raise_to(users.key(conversation_id, user_id), "read_seq", seq, USER_COUNTERS)
    return Update(command.filter, command.update, upsert=True)


def watermarks(conversation_id: str, user_id: str, users: UserDocs) -> list[Doc]:
    """One aggregate on the data collection: the user's floor, then the conversation counters.

    The user's document by its unique key, then ``$unionWith`` (MongoDB >= 4.4) of the
    counter by its own: one round trip, whichever of the two exists. It starts on the data
    collection because an emulator (mongoeco) reads a whole collection for a ``$unionWith``
    or ``$lookup`` of it, and ``seq`` is the small one.
    """
    return [
        {"$match": users.key(conversation_id, user_id)},
        {"$project": {"_id": 0, "user_min_seq": "$min_seq"}},
        {
            "$unionWith": {
                "coll": SEQS,
                "pipeline": [
                    {"$match": conversation_seqs(conversation_id)},
                    {"$project": {"_id": 0, "max_seq": 1, "min_seq": 1}},
                ],
            }
        },
    ]
