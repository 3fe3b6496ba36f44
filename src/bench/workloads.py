"""The workloads: each plans the same operations for every backend from the dataset's seed.

A plan is a list of ``Op``: ``prepare(subject)`` runs untimed (it builds messages, picks
arguments) and returns the thunk that is timed. Plans depend only on the dataset, never on
the backend, so every backend performs identical operations on identical data.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from imbucket.app.service import MessageService
from imbucket.bench.dataset import Batch, Conversation, Dataset
from imbucket.bench.defaults import INGEST_TIMED_SHARE
from imbucket.domain.budget import DEFAULT_MAX_DELETERS_PER_SLOT
from imbucket.domain.model import Actor, InsertResult, Message, Role
from imbucket.domain.projection import Entry

Thunk = Callable[[], object]


class RawArm(Protocol):
    """A hand-written driver query doing what ``pull_latest`` does, for the overhead ratio."""

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """The newest count messages the viewer may see (raw rows)."""
        ...


@dataclass(frozen=True, slots=True)
class Subject:
    """What an operation runs against: the service, and the raw arm where there is one."""

    service: MessageService
    raw: RawArm | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """One planned operation and how many items (messages or seqs) it handles."""

    prepare: Callable[[Subject], Thunk]
    items: int = 1


class BenchCheckFailed(Exception):
    """An operation returned something other than what the dataset implies."""


@dataclass(frozen=True, slots=True)
class Workload:
    """A named list of operations, with the text the report shows."""

    name: str
    title: str
    about: str
    plan: Callable[[Dataset], list[Op]]
    raw: bool = False  # runs on the raw-driver arm instead of the service
    received: bool = (
        False  # also counts the bytes the drivers receive (imbucket.bench.instrument.received)
    )


ADMIN = Actor("bench-admin", Role.APP_ADMIN)
INLINE_DELETERS = DEFAULT_MAX_DELETERS_PER_SLOT  # deleters a bucket slot keeps inline


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise BenchCheckFailed(what)


def _ingest_op(data: Dataset, batch: Batch, redelivery: bool) -> Op:
    def prepare(subject: Subject) -> Thunk:
        return partial(_ingest_checked, subject.service, batch, data.messages_of(batch), redelivery)

    return Op(prepare, batch.size)


def _ingest_checked(
    service: MessageService, batch: Batch, messages: list[Message], redelivery: bool
) -> InsertResult:
    result = service.ingest(batch.conversation.id, messages)
    stored = result.duplicates if redelivery else result.inserted
    _expect(len(stored) == len(messages), f"ingest of {batch.conversation.id}: {result}")
    return result


def _ingest(data: Dataset) -> list[Op]:
    return [_ingest_op(data, batch, redelivery=False) for batch in data.ingested_batches()]


def _redeliver(data: Dataset) -> list[Op]:
    """A sample of the batches, in delivery order, delivered a second time."""
    batches = data.batches()
    count = min(len(batches), data.scale.redeliveries)
    picks = data.rng("redeliver").sample(range(len(batches)), count)
    return [_ingest_op(data, batches[n], redelivery=True) for n in sorted(picks)]


def _split(data: Dataset) -> tuple[list[Conversation], list[Conversation]]:
    groups = [c for c in data.conversations if c.is_group]
    singles = [c for c in data.conversations if not c.is_group]
    return singles, groups


def _call(method: str, *args: Any, items: int = 1, **kwargs: Any) -> Op:
    """An operation calling one MessageService method with fixed arguments."""
    return Op(lambda subject: partial(getattr(subject.service, method), *args, **kwargs), items)


def _each(
    data: Dataset,
    purpose: str,
    pool: Sequence[Conversation],
    make: Callable[[random.Random, Conversation], Op],
) -> list[Op]:
    """``scale.ops`` operations, each on a conversation drawn from pool (none if it is empty)."""
    if not pool:
        return []  # a team's traffic may have no conversation this workload needs
    rng = data.rng(purpose)
    return [make(rng, rng.choice(pool)) for _ in range(data.scale.ops)]


def _latest(data: Dataset, raw: bool) -> list[Op]:
    """Half the pulls open a 1:1 chat, half a group; the viewer is a member."""
    singles, groups = _split(data)
    rng = data.rng("pull_latest")
    ops = []
    for n in range(data.scale.ops):
        conv = rng.choice(groups if n % 2 else singles)
        ops.append(Op(_pull_latest(conv, rng.choice(conv.members), raw), 20))
    return ops


def _pull_latest(conv: Conversation, viewer: str, raw: bool) -> Callable[[Subject], Thunk]:
    def prepare(subject: Subject) -> Thunk:
        if not raw:
            return lambda: _expect_latest(subject.service.pull_latest(conv.id, viewer, 20), conv)
        if subject.raw is None:
            raise BenchCheckFailed("no raw arm for this backend")
        return partial(subject.raw.pull_latest, conv.id, viewer, 20)

    return prepare


def _expect_latest(entries: list[Entry], conv: Conversation) -> list[Entry]:
    _expect(len(entries) == min(20, conv.size), f"pull_latest of {conv.id}")
    return entries


PULL_RANGE_ITEMS = 100
"""The messages a pull_range reads: it runs on conversations holding at least as many."""


def _range(data: Dataset) -> list[Op]:
    def make(rng: random.Random, conv: Conversation) -> Op:
        first = rng.randint(1, conv.size - PULL_RANGE_ITEMS + 1)
        last = first + PULL_RANGE_ITEMS - 1
        return _call("pull_range", conv.id, rng.choice(conv.members), first, last, items=100)

    eligible = [c for c in data.conversations if c.size >= PULL_RANGE_ITEMS]
    return _each(data, "pull_range", eligible, make)


def _scattered(data: Dataset) -> list[Op]:
    def make(rng: random.Random, conv: Conversation) -> Op:
        seqs = rng.sample(range(1, conv.size + 1), 20)
        return _call("pull", conv.id, rng.choice(conv.members), seqs, items=20)

    return _each(data, "pull_scattered", [c for c in data.conversations if c.size >= 1_000], make)


def _revoke(data: Dataset) -> list[Op]:
    """Senders revoke one of their own messages."""

    def make(rng: random.Random, conv: Conversation) -> Op:
        seq = rng.randint(1, conv.size)
        return _call("revoke", conv.id, seq, Actor(data.sender(conv, seq)), nickname="bench")

    return _each(data, "revoke", data.conversations, make)


def _delete(data: Dataset) -> list[Op]:
    """A member deletes 1–5 messages of a conversation for themselves."""

    def make(rng: random.Random, conv: Conversation) -> Op:
        seqs = rng.sample(range(1, conv.size + 1), min(conv.size, rng.randint(1, 5)))
        return _call("delete_for_me", conv.id, seqs, rng.choice(conv.members), items=len(seqs))

    return _each(data, "delete_for_me", data.conversations, make)


def _hot_delete(data: Dataset, spilled: bool) -> list[Op]:
    """Members of the largest group delete its newest message, one after another.

    The first ``INLINE_DELETERS`` (the bucket stores' default inline cap per slot) run as
    ``hot_delete``; those beyond it, whose ids a bucket store keeps in its side table, run
    as ``hot_delete_spilled``, so that spill costs show on their own.
    """
    conv = data.largest
    users = conv.members[: data.scale.hot_deleters]
    users = users[INLINE_DELETERS:] if spilled else users[:INLINE_DELETERS]
    return [_call("delete_for_me", conv.id, [conv.size], user) for user in users]


HOT_VIEWER = "bench-hot-viewer"  # never deletes or clears anything


def _pull_hot(data: Dataset) -> list[Op]:
    """A viewer who deleted nothing pulls the hot message (before or after its deleters)."""
    conv = data.largest
    return [_call("pull", conv.id, HOT_VIEWER, [conv.size]) for _ in range(HOT_PULLS)]


HOT_PULLS = 1_000  # a pull is cheap: enough of them for each trial to hold a steady median


def _mark_read(data: Dataset) -> list[Op]:
    """In 1:1 chats a member marks the latest (up to 20) messages read."""

    def make(rng: random.Random, conv: Conversation) -> Op:
        seqs = list(range(max(1, conv.size - 19), conv.size + 1))
        return _call("mark_read", conv.id, seqs, rng.choice(conv.members), items=len(seqs))

    return _each(data, "mark_read", _split(data)[0], make)


def _purge(data: Dataset) -> list[Op]:
    """An app admin physically deletes 1–5 messages of a group."""

    def make(rng: random.Random, conv: Conversation) -> Op:
        seqs = rng.sample(range(1, conv.size), rng.randint(1, 5))
        return _call("purge", conv.id, seqs, ADMIN, items=len(seqs))

    return _each(data, "purge", _split(data)[1], make)


def _clear(data: Dataset, largest: bool) -> list[Op]:
    if largest:
        conv = data.largest
        rng = data.rng("clear_largest")
        users = rng.sample(conv.members, min(len(conv.members), data.scale.ops))
        return [_call("clear_history", conv.id, user) for user in users]

    def make(rng: random.Random, conv: Conversation) -> Op:
        return _call("clear_history", conv.id, rng.choice(conv.members))

    return _each(data, "clear_small", [c for c in data.conversations if c.size <= 100], make)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "ingest",
        "ingest",
        "consumer batches of ≤100 messages per conversation, conversations interleaved: the "
        f"last {INGEST_TIMED_SHARE:.0%} of the dataset's batches, after the bulk loader wrote "
        "the others (untimed)",
        _ingest,
    ),
    Workload(
        "redeliver",
        "redelivery",
        "a sample of the same batches delivered again (all duplicates, nothing written)",
        _redeliver,
    ),
    Workload(
        "pull_latest",
        "pull_latest(20)",
        "open a conversation: its newest 20 messages (half 1:1 chats, half groups)",
        lambda data: _latest(data, raw=False),
    ),
    Workload(
        "raw_pull_latest",
        "raw pull_latest(20)",
        "the same pulls as one hand-written driver query, no service (SQL and MongoDB stores)",
        lambda data: _latest(data, raw=True),
        raw=True,
    ),
    Workload(
        "pull_range",
        "pull_range(100)",
        "scroll back: 100 consecutive messages at a random place of a long conversation",
        _range,
    ),
    Workload(
        "pull_scattered",
        "pull 20 scattered seqs",
        "20 random seqs of a big group (search hits, replies, pinned messages)",
        _scattered,
    ),
    Workload("revoke", "revoke", "a sender revokes one of their messages", _revoke),
    Workload(
        "delete_for_me",
        "delete_for_me",
        "a member deletes 1–5 messages for themselves",
        _delete,
    ),
    Workload(
        "pull_hot",
        "pull the hot message (no deleters)",
        "a viewer pulls the newest message of the largest group before anyone deleted it; "
        "the bytes the drivers receive are counted",
        _pull_hot,
        received=True,
    ),
    Workload(
        "hot_delete",
        "hot message deleted by many",
        "members of the largest group delete its newest message, one after another, up "
        f"to the bucket stores' inline cap of {INLINE_DELETERS:,} deleters per slot",
        lambda data: _hot_delete(data, spilled=False),
    ),
    Workload(
        "hot_delete_spilled",
        "hot message deleted past the inline cap",
        "more members delete the same message; a bucket store keeps these deleters in its "
        "side table (spill)",
        lambda data: _hot_delete(data, spilled=True),
    ),
    Workload(
        "pull_hot_deleted",
        "pull the hot message (after its deleters)",
        "the same viewer pulls the same message after the hot deletes; the bytes the "
        "drivers receive are counted",
        _pull_hot,
        received=True,
    ),
    Workload(
        "mark_read",
        "mark_read",
        "in a 1:1 chat the reader marks the latest ≤20 messages read",
        _mark_read,
    ),
    Workload("purge", "purge", "an app admin physically deletes 1–5 messages of a group", _purge),
    Workload(
        "clear_small",
        "clear_history (small)",
        "a member clears a conversation of ≤100 messages",
        lambda data: _clear(data, largest=False),
    ),
    Workload(
        "clear_largest",
        "clear_history (largest)",
        "members clear the largest conversation",
        lambda data: _clear(data, largest=True),
    ),
)

WORKLOAD_NAMES = tuple(w.name for w in WORKLOADS)
