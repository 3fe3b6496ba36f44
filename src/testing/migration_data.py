"""A small store holding every kind of state a migration must carry, and how to compare two.

``fill`` writes, through the service (and the store for tags before a message lands):
messages over several buckets of any size up to 500, send claims, a revoke, deleters (more
than one per slot, so a source opened with one deleter inline spills), early readers of a
seq whose message never lands, is_read in a 1:1 chat (whose messages set every OpenIM
field), purged seqs with and without a message, a user's clear floor, a conversation
floor, read seqs, and a conversation that has counters only. ``views`` is what every user
sees of all of it, independent of the scans.
"""

from __future__ import annotations

from typing import Any

from imbucket.app import MessageService
from imbucket.domain.model import Actor, Draft, Revoke, Role, SessionType
from imbucket.testing.factories import full_message, messages

GROUP = "sg_migrate"
SINGLE = "si_alice_bob"
CLEARED = "sg_cleared"
COUNTERS_ONLY = "sg_allocated"
CONVERSATIONS = (GROUP, SINGLE, CLEARED, COUNTERS_ONLY)
USERS = ("alice", "bob", "carol", "dave", "erin", "nobody")
CLIENT_MSG_IDS = ("send-1", "send-2", "send-3")
LAST = 240  # the group's max_seq: messages up to 120 (by default), tags beyond
OWNER = Actor("olivia", Role.OWNER)


def fill(service: MessageService, group_messages: int = 120) -> None:
    """Write the dataset (see the module docstring) into an empty store."""
    drafts = [
        Draft(
            send_id="alice",
            content=f"sent {cid}",
            client_msg_id=cid,
            group_id="g",
            session_type=SessionType.GROUP,
        )
        for cid in CLIENT_MSG_IDS
    ]
    service.send(GROUP, drafts)  # seqs 1..3 and their claims
    service.ingest(GROUP, messages(4, group_messages, GROUP))
    service.revoke(GROUP, 5, Actor("alice"))
    for user in ("bob", "carol", "dave"):  # three deleters of one slot
        service.delete_for_me(GROUP, [6, 100], user)
    service.purge(GROUP, [7], OWNER)
    service.seqs.allocate(GROUP, LAST - service.max_seq(GROUP))
    service.mark_read(GROUP, [231, 232], "bob")  # early readers: no message yet
    service.mark_read(GROUP, [231], "carol")
    service.delete_for_me(GROUP, [233], "carol")  # a deleter waiting for the message
    service.store.revoke(GROUP, 234, Revoke("alice", Role.MEMBER, "Alice", 7))
    service.purge(GROUP, [235], OWNER)  # purged before any message
    service.clear_history(GROUP, "erin")
    service.mark_read(GROUP, list(range(1, 40)), "dave")
    single = [
        full_message(seq, SINGLE, session_type=SessionType.SINGLE, recv_id="bob", group_id="")
        for seq in range(1, 6)
    ]
    service.ingest(SINGLE, single)
    service.mark_read(SINGLE, [1, 2, 3], "bob")
    service.ingest(CLEARED, messages(1, 10, CLEARED))
    service.clear_for_everyone(CLEARED, OWNER)
    service.seqs.allocate(COUNTERS_ONLY, 12)


def views(service: MessageService) -> dict[str, Any]:
    """Every user's pull of every seq (and a few beyond), plus every watermark and claim."""
    seen: dict[str, Any] = {}
    for conversation in CONVERSATIONS:
        last = service.max_seq(conversation) + 3
        seqs = service.seqs
        seen[conversation] = {
            "pulls": {
                user: [
                    service.pull(conversation, user, list(range(first, min(first + 100, last + 1))))
                    for first in range(1, last + 1, 100)
                ]
                for user in USERS
            },
            "max_seq": seqs.max_seq(conversation),
            "min_seq": seqs.min_seq(conversation),
            "users": {
                user: (seqs.user_min_seq(conversation, user), seqs.read_seq(conversation, user))
                for user in USERS
            },
            "sends": seqs.sent_seqs(conversation, list(CLIENT_MSG_IDS)),
            "slots": service.store.get(conversation, list(range(1, last + 1))),
        }
    return seen
