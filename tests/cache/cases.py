"""A small single chat and the mutations the cache must follow, shared by the cache tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from imbucket.app import MessageService
from imbucket.domain.model import Actor, Message, Role, SessionType
from imbucket.domain.projection import Entry, MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import messages

CONV = "si_alice_bob"
OWNER = Actor("olivia", Role.OWNER)


def chat(first: int, last: int) -> list[Message]:
    """Messages alice sent bob, seqs first..last."""
    return messages(first, last, CONV, session_type=SessionType.SINGLE, recv_id="bob", group_id="")


def seed(service: MessageService) -> None:
    """Seqs 1..5 stored; 6 allocated, not persisted, but already deleted by carol (a tag)."""
    service.ingest(CONV, chat(1, 5))
    service.seqs.raise_max_seq(CONV, 6)
    service.delete_for_me(CONV, [6], "carol")


def tombstone(reason: TombstoneReason) -> Callable[[Entry], bool]:
    """Predicate: the entry is a tombstone for reason."""
    return lambda entry: isinstance(entry, Tombstone) and entry.reason == reason


@dataclass(frozen=True)
class Mutation:
    """A mutation of one seq of the seeded chat, and how bob's view of that seq shows it."""

    name: str
    seq: int
    apply: Callable[[MessageService], object]
    shows: Callable[[Entry], bool]


MUTATIONS = [
    Mutation(
        "insert",
        6,
        lambda s: s.ingest(CONV, chat(6, 6)),
        lambda e: isinstance(e, MessageView) and e.content == "message 6",
    ),
    Mutation(
        "revoke",
        3,
        lambda s: s.revoke(CONV, 3, Actor("alice")),
        lambda e: isinstance(e, MessageView) and e.revoked is not None,
    ),
    Mutation(
        "delete_for",
        3,
        lambda s: s.delete_for_me(CONV, [3], "bob"),
        tombstone(TombstoneReason.DELETED),
    ),
    Mutation(
        "mark_read",
        3,
        lambda s: s.mark_read(CONV, [3], "bob"),
        lambda e: isinstance(e, MessageView) and e.is_read is True,
    ),
    Mutation("purge", 3, lambda s: s.purge(CONV, [3], OWNER), tombstone(TombstoneReason.PURGED)),
]
