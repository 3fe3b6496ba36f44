"""A full dump of what a test's conversations hold, to show that a refused call wrote nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imbucket.adapters.cached_store import CachedMessageStore
from imbucket.app import MessageService
from imbucket.testing.factories import CONV

CONVERSATIONS = (CONV, "si_alice_bob")
USERS = ("alice", "bob", "carol", "olivia")
CLIENT_MSG_IDS = tuple(f"draft-{n}" for n in range(10))
SPARE = 5  # seqs beyond max_seq dumped too: nothing may ever be written there


def dump(
    service: MessageService,
    conversations: Sequence[str] = CONVERSATIONS,
    users: Sequence[str] = USERS,
    client_msg_ids: Sequence[str] = CLIENT_MSG_IDS,
) -> dict[str, Any]:
    """Every stored slot (read past the cache), counter, watermark and send claim."""
    store = service.store
    if isinstance(store, CachedMessageStore):
        store = store.store
    seqs = service.seqs
    state: dict[str, Any] = {}
    for conversation in conversations:
        max_seq = seqs.max_seq(conversation)
        state[conversation] = {
            "slots": store.get(conversation, list(range(1, max_seq + SPARE + 1))),
            "max_seq": max_seq,
            "min_seq": seqs.min_seq(conversation),
            "users": {
                user: (seqs.user_min_seq(conversation, user), seqs.read_seq(conversation, user))
                for user in users
            },
            "sends": seqs.sent_seqs(conversation, client_msg_ids),
        }
    return state
