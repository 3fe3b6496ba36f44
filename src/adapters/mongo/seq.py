"""SeqStore on collection ``seq``, and user documents and send claims in the data collection.

``seq`` holds max_seq and min_seq per conversation; the store's data collection (``msg`` or
``msg_row``) one document of min_seq and read_seq per (conversation, user)
(``commands.UserDocs``: OpenIM keeps those in ``seq_user``) and one claim per
(conversation, client_msg_id) holding the seq send recorded for it (``commands.ClaimDocs``).
Unlike OpenIM, all are unique by key, so concurrent first upserts cannot create two
counters, two claims of one client_msg_id cannot both land, and every ``raise_*`` uses
``$max`` so a watermark never moves down.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError

from imbucket.adapters import asyncio_bridge
from imbucket.adapters.mongo import commands, replies
from imbucket.adapters.mongo.commands import (
    CONVERSATION_COUNTERS,
    USER_COUNTERS,
    Doc,
    FindAndUpdate,
    UserDocs,
)
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.adapters.timeouts import millis
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import TableStats, Watermarks
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs


class MongoSeqStore:
    """Seq counters by conversation_id and watermarks by (conversation_id, user_id).

    users: the data collection, which keeps the user documents and the send claims.
    """

    def __init__(self, connection: MongoConnection, users: UserDocs) -> None:
        self._connection = connection
        self._users_at = users
        self._users = connection.collection(users.collection)
        self.claims = commands.ClaimDocs(users.collection)
        self._sends = connection.collection(users.collection)
        connection.ensure_indexes(commands.SEQS)
        connection.ensure_claim_indexes(users.collection)

    def allocate(self, conversation_id: str, n: int) -> int:
        """``find_one_and_update`` with ``$inc`` and upsert: one atomic round trip."""
        found = self._run(commands.SEQS, commands.allocate(conversation_id, n), "allocate seqs")
        return int(found["max_seq"]) - n + 1

    def max_seq(self, conversation_id: str) -> int:
        """Highest allocated seq."""
        return self._get(commands.SEQS, commands.conversation_seqs(conversation_id), "max_seq")

    def raise_max_seq(self, conversation_id: str, seq: int) -> int:
        """Raise max_seq (``$max``)."""
        key = commands.conversation_seqs(conversation_id)
        return self._raise(commands.SEQS, key, "max_seq", seq, CONVERSATION_COUNTERS)

    def min_seq(self, conversation_id: str) -> int:
        """Conversation floor."""
        return self._get(commands.SEQS, commands.conversation_seqs(conversation_id), "min_seq")

    def raise_min_seq(self, conversation_id: str, seq: int) -> int:
        """Raise the conversation floor (``$max``)."""
        key = commands.conversation_seqs(conversation_id)
        return self._raise(commands.SEQS, key, "min_seq", seq, CONVERSATION_COUNTERS)

    def user_min_seq(self, conversation_id: str, user_id: str) -> int:
        """User floor."""
        return self._get(self._users_at.collection, self._user(conversation_id, user_id), "min_seq")

    def raise_user_min_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user floor in one write (``$max``)."""
        key = self._user(conversation_id, user_id)
        return self._raise(self._users_at.collection, key, "min_seq", seq, USER_COUNTERS)

    def read_seq(self, conversation_id: str, user_id: str) -> int:
        """User read seq."""
        key = self._user(conversation_id, user_id)
        return self._get(self._users_at.collection, key, "read_seq")

    def raise_read_seq(self, conversation_id: str, user_id: str, seq: int) -> int:
        """Raise the user read seq (``$max``)."""
        key = self._user(conversation_id, user_id)
        return self._raise(self._users_at.collection, key, "read_seq", seq, USER_COUNTERS)

    def sent_seqs(
        self, conversation_id: str, client_msg_ids: Sequence[str], since: int = 0
    ) -> dict[str, int]:
        """One find of the claims by their unique key, claims of since or later."""
        if not client_msg_ids:
            return {}
        with translated("read sent seqs"):
            found = self._sends.find(
                commands.sends_in(self.claims, conversation_id, client_msg_ids, since),
                self.claims.fields,
            )
            return self.claims.seq_of(found)

    def claim_sends(
        self, conversation_id: str, claims: Mapping[str, int], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """An unordered insert_many (duplicates: claimed before), then one find: 2 round trips.

        Claims refused as duplicates are replaced where they expired (one more bulk write).
        """
        if not claims:
            return {}
        command = commands.claim_sends(self.claims, conversation_id, claims, at, since)
        with translated("claim client_msg_ids"):
            try:
                self._sends.insert_many(command.documents, ordered=command.ordered)
            except BulkWriteError as error:
                taken = replies.duplicate_positions(error.details)  # raises on other errors
                if since:
                    self._replace_expired(conversation_id, command.documents, taken, at, since)
        return self.sent_seqs(conversation_id, list(claims))

    def allocate_sends(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int = 0, since: int = 0
    ) -> dict[str, int]:
        """Claim first (pending, no seq), allocate once for the claims won, record by CAS.

        Uncontended: the insert of pending claims, the allocation and the bulk write of their
        seqs (3 round trips). Ids claimed by another call: a takeover of those expired or
        pending for longer than the lease (one bulk write and one find), then a find every
        few milliseconds until their seqs are recorded, at most the call bound
        (StoreUnavailable after it: the client retries).
        """
        wanted = list(dict.fromkeys(client_msg_ids))
        if not wanted:
            return {}
        owner = uuid.uuid4().hex

        def claim(ids: list[str]) -> dict[str, int]:
            ours = self._claim_pending(conversation_id, ids, owner, at, since)
            return self._record(conversation_id, ours, owner) if ours else {}

        with translated("claim client_msg_ids"):
            return self._wait_for(conversation_id, wanted, claim(wanted), since, claim)

    def claim_fresh(
        self, conversation_id: str, client_msg_ids: Sequence[str], at: int, since: int = 0
    ) -> dict[str, int] | None:
        """``allocate_sends`` without the lookup before it, for a batch new to the conversation.

        Uncontended: the insert of pending claims, the allocation and the bulk write of their
        seqs (3 round trips; see ``imbucket.ports.fresh_sends.FreshSends``). None, with
        nothing written, when any client_msg_id was claimed before: the claims of the batch
        that did land are deleted again (one more round trip; a concurrent call waiting for
        one of them then claims it itself, see ``_wait_for``).
        """
        wanted = list(dict.fromkeys(client_msg_ids))
        if not wanted:
            return {}
        owner = uuid.uuid4().hex
        with translated("claim client_msg_ids"):
            if not self.claim_new(conversation_id, wanted, owner, at, since):
                return None
            recorded = self._record(conversation_id, wanted, owner)
        # Short of all of them only when this call outlived its lease: the general path
        # reads the seq each claim holds.
        return recorded if len(recorded) == len(wanted) else None

    def claim_new(
        self, conversation_id: str, wanted: list[str], owner: str, at: int, since: int
    ) -> bool:
        """Insert owner's pending claim of each id of wanted: one insertMany.

        False, with nothing left claimed, when any of them was claimed before: the claims
        of wanted that did land are deleted again (one more round trip; a concurrent call
        waiting for one of them then claims it itself, see ``_wait_for``).
        """
        claimed = self._insert_pending(conversation_id, wanted, owner, at, since)
        if not claimed:
            return True
        landed = [cid for cid in wanted if cid not in set(claimed)]
        if landed:
            self._sends.delete_many(
                commands.pending_of(self.claims, conversation_id, landed, owner)
            )
        return False

    def _claim_pending(
        self, conversation_id: str, wanted: list[str], owner: str, at: int, since: int
    ) -> list[str]:
        """The ids of wanted whose pending claim this call now holds, in the order given."""
        claimed = self._insert_pending(conversation_id, wanted, owner, at, since)
        return self._held(conversation_id, wanted, claimed, owner, at, since)

    def _insert_pending(
        self, conversation_id: str, wanted: list[str], owner: str, at: int, since: int
    ) -> list[str]:
        """Insert owner's pending claim of each id of wanted; the ids claimed before."""
        command = commands.claim_pending(self.claims, conversation_id, wanted, owner, at, since)
        try:
            self._sends.insert_many(command.documents, ordered=command.ordered)
            return []
        except BulkWriteError as error:
            taken = replies.duplicate_positions(error.details)  # raises on other errors
        return [self.claims.owner(command.documents[i])[1] for i in taken]

    def _held(
        self,
        conversation_id: str,
        wanted: list[str],
        claimed: list[str],
        owner: str,
        at: int,
        since: int,
    ) -> list[str]:
        """The ids of wanted owner holds, once it took over the dead claims among claimed.

        claimed: the ids whose claim another call made (the others are owner's already).
        """
        if not claimed:
            return wanted
        stale_before = at - millis(self._lease)
        updates = commands.take_over(
            self.claims, conversation_id, claimed, owner, at, since, stale_before
        )
        self._sends.bulk_write([UpdateOne(u.filter, u.update) for u in updates], ordered=False)
        held = self._sends.find(
            commands.pending_of(self.claims, conversation_id, claimed, owner), self.claims.fields
        )
        mine = {self.claims.owner(doc)[1] for doc in held} | (set(wanted) - set(claimed))
        return [cid for cid in wanted if cid in mine]

    def _record(self, conversation_id: str, ours: list[str], owner: str) -> dict[str, int]:
        """Allocate len(ours) seqs and write them into the claims; those written."""
        first = self.allocate(conversation_id, len(ours))
        seqs = {cid: first + offset for offset, cid in enumerate(ours)}
        updates = commands.record_seqs(self.claims, conversation_id, seqs, owner)
        done = self._sends.bulk_write([UpdateOne(u.filter, u.update) for u in updates])
        # A claim taken over meanwhile (this call outlived its lease) keeps the other seq;
        # the find that follows reads which one each id holds.
        return seqs if done.modified_count == len(seqs) else {}

    def _wait_for(
        self,
        conversation_id: str,
        wanted: list[str],
        recorded: dict[str, int],
        since: int,
        claim: Callable[[list[str]], dict[str, int]],
    ) -> dict[str, int]:
        """recorded, plus the seqs other calls record for the rest of wanted (bounded wait).

        A claim waited for that is gone (withdrawn by a fresh send refused in part, or
        expired) is claimed again with claim, which returns the seqs it recorded.
        """
        deadline = time.monotonic() + self._connection.timeouts.call
        pause = 0.002
        while rest := [cid for cid in wanted if cid not in recorded]:
            found = list(
                self._sends.find(
                    commands.sends_in(self.claims, conversation_id, rest, since),
                    self.claims.fields,
                )
            )
            recorded.update(self.claims.seq_of(found))
            present = {self.claims.owner(doc)[1] for doc in found}
            if gone := [cid for cid in rest if cid not in present]:
                recorded.update(claim(gone))
            if len(recorded) < len(wanted):
                if time.monotonic() > deadline:
                    raise StoreUnavailable(
                        f"client_msg_ids {rest[:5]} are still being sent by another call"
                    )
                asyncio_bridge.pause(pause)
                pause = min(pause * 2, 0.1)
        return recorded

    @property
    def _lease(self) -> float:
        """Seconds a pending claim holds before a retry may take it over.

        Its sender's allocation and record, each a call with its own bound.
        """
        return 2 * self._connection.timeouts.call

    def prune_sends(self, before: int, limit: int) -> int:
        """A find of at most limit expired claims' _ids, then one delete_many of those.

        The TTL index on expire_at deletes expired claims by itself too (within ~60 s).
        """
        with translated("prune send claims"):
            old = self._sends.find(commands.claims_before(before), {"_id": 1}).limit(limit)
            ids = [doc["_id"] for doc in old]
            if not ids:
                return 0
            return int(self._sends.delete_many({"_id": {"$in": ids}}).deleted_count)

    def send_claims(self) -> TableStats:
        """The claims' number and bytes (BSON and their own indexes): two aggregates."""
        with translated("read the send claims' stats"):
            storage = list(self._sends.aggregate(commands.STORAGE_STATS))
            counted = list(self._sends.aggregate(commands.claim_footprint()))
        return replies.claim_stats(storage, counted)

    def _replace_expired(
        self, conversation_id: str, documents: list[Doc], taken: Sequence[int], at: int, since: int
    ) -> None:
        again = {self.claims.owner(documents[i])[1]: documents[i]["seq"] for i in taken}
        updates = commands.replace_expired(self.claims, conversation_id, again, at, since)
        self._sends.bulk_write([UpdateOne(u.filter, u.update) for u in updates], ordered=False)

    def scan_counters(self, after: str | None, limit: int) -> SeqPage[Counters]:
        """One find over ``seq`` in conversation_id order."""
        found, cursor = self._connection.scan(commands.SEQS, after, limit)
        rows = [
            Counters(d["conversation_id"], int(d.get("max_seq", 0)), int(d.get("min_seq", 0)))
            for d in found
        ]
        return SeqPage(tuple(rows), cursor)

    def scan_user_seqs(self, after: str | None, limit: int) -> SeqPage[UserSeqs]:
        """One find over the user documents in (conversation_id, user_id) order (their keys)."""
        scanned = commands.USERS_IN + self._users_at.collection
        found, cursor = self._connection.scan(scanned, after, limit)
        rows = [self._user_seqs(d) for d in found]
        return SeqPage(tuple(rows), cursor)

    def scan_sends(self, after: str | None, limit: int) -> SeqPage[SendClaim]:
        """One find over the claims in (conversation_id, client_msg_id) order (their keys)."""
        scanned = commands.CLAIMS_IN + self._users_at.collection
        found, cursor = self._connection.scan(scanned, after, limit)
        rows = [
            SendClaim(*self.claims.owner(d), int(d["seq"]), replies.epoch_ms(d.get("claimed_at")))
            for d in found
            if int(d["seq"]) > 0  # a pending claim: its sender is allocating right now
        ]
        return SeqPage(tuple(rows), cursor)

    def counters_of(self, conversation_ids: Sequence[str]) -> dict[str, Counters]:
        """One find with ``$in``; see SeqStore.counters_of."""
        found = {c: Counters(c, 0, 0) for c in conversation_ids}
        if conversation_ids:
            query = {"conversation_id": {"$in": sorted(set(conversation_ids))}}
            with translated("read counters"):
                for d in self._connection.collection(commands.SEQS).find(query, {"_id": 0}):
                    c = d["conversation_id"]
                    found[c] = Counters(c, int(d.get("max_seq", 0)), int(d.get("min_seq", 0)))
        return found

    def user_seqs_of(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], UserSeqs]:
        """One find with ``$in`` of the keys; see SeqStore.user_seqs_of."""
        found = {(c, u): UserSeqs(c, u, 0, 0) for c, u in keys}
        if keys:
            query = self._users_at.keys_in(sorted(set(keys)))
            with translated("read user watermarks"):
                for d in self._users.find(query):
                    seqs = self._user_seqs(d)
                    found[seqs.conversation_id, seqs.user_id] = seqs
        return found

    def batch(self) -> AbstractContextManager[None]:
        """Writes as usual; see SeqStore.batch."""
        return nullcontext()

    def watermarks(self, conversation_id: str, user_id: str) -> Watermarks:
        """One aggregate: the user's document, then ``$unionWith`` of ``seq``: one round trip."""
        pipeline = commands.watermarks(conversation_id, user_id, self._users_at)
        with translated("read watermarks"):
            found = list(self._users.aggregate(pipeline))
        return replies.watermarks(found)

    def close(self) -> None:
        """Close the client."""
        self._connection.close()

    def _get(self, name: str, key: Doc, field: str) -> int:
        with translated(f"read {field}"):
            found = self._connection.collection(name).find_one(key, {"_id": 0, field: 1})
        return 0 if found is None else int(found.get(field, 0))

    def _user(self, conversation_id: str, user_id: str) -> Doc:
        return self._users_at.key(conversation_id, user_id)

    def _user_seqs(self, document: Doc) -> UserSeqs:
        conversation_id, user_id = self._users_at.owner(document)
        min_seq, read_seq = int(document.get("min_seq", 0)), int(document.get("read_seq", 0))
        return UserSeqs(conversation_id, user_id, min_seq, read_seq)

    def _raise(self, name: str, key: Doc, field: str, seq: int, counters: Sequence[str]) -> int:
        command = commands.raise_to(key, field, seq, counters)
        return int(self._run(name, command, f"raise {field}")[field])

    def _run(self, name: str, command: FindAndUpdate, action: str) -> Doc:
        found = self._connection.find_and_update(name, command, action)
        if found is None:  # an upsert returning the new document always returns one
            raise AssertionError(f"{action}: upsert returned nothing")
        return found
