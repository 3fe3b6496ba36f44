"""The workloads: each plans the same operations for every backend from the dataset's seed.

A plan is a list of ``Op``: ``prepare(target)`` runs untimed (it builds messages, picks
arguments) and returns the thunk that is timed. Plans depend only on the dataset, never on
the backend, so every backend performs identical operations on identical data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.bench.dataset import Conversation, Dataset
from app.service import MessageService
from domain.model import Actor, Role
from domain.projection import Entry

Thunk = Callable[[], object]


class RawArm(Protocol):
    """A hand-written driver query doing what ``pull_latest`` does, for the overhead ratio."""

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """The newest count messages the viewer may see (raw rows)."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """What an operation runs against: the service, and the raw arm where there is one."""

    service: MessageService
    raw: RawArm | None = None


@dataclass(frozen=True, slots=True)
class Op:
    """One planned operation and how many items (messages or seqs) it handles."""

    prepare: Callable[[Target], Thunk]
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


ADMIN = Actor("bench-admin", Role.APP_ADMIN)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise BenchCheckFailed(what)


def _ingest(batches_of: Callable[[Dataset], list[Any]], redelivery: bool) -> Any:
    def plan(data: Dataset) -> list[Op]:
        def op(batch: Any) -> Op:
            def prepare(target: Target) -> Thunk:
                messages = data.messages_of(batch)
                conv_id = batch.conversation.id

                def run() -> object:
                    result = target.service.ingest(conv_id, messages)
                    stored = result.duplicates if redelivery else result.inserted
                    _expect(len(stored) == len(messages), f"ingest of {conv_id}: {result}")
                    return result

                return run

            return Op(prepare, batch.size)

        return [op(batch) for batch in batches_of(data)]

    return plan


def _redelivered(data: Dataset) -> list[Any]:
    batches = data.batches()
    picks = data.rng("redeliver").sample(range(len(batches)), min(len(batches), data.scale.ops))
    return [batches[n] for n in sorted(picks)]


def _split(data: Dataset) -> tuple[list[Conversation], list[Conversation]]:
    groups = [c for c in data.conversations if c.is_group]
    singles = [c for c in data.conversations if not c.is_group]
    return singles, groups


def _service_op(call: Callable[[MessageService], object], items: int = 1) -> Op:
    return Op(lambda target: lambda: call(target.service), items)


def _latest(data: Dataset, raw: bool) -> list[Op]:
    """Half the pulls open a 1:1 chat, half a group; the viewer is a member."""
    singles, groups = _split(data)
    rng = data.rng("pull_latest")
    ops = []
    for n in range(data.scale.ops):
        conv = rng.choice(groups if n % 2 else singles)
        viewer = rng.choice(conv.members)
        if raw:
            ops.append(Op(_raw_latest(conv.id, viewer), 20))
        else:
            ops.append(_service_op(_pull_latest(conv, viewer), 20))
    return ops


def _pull_latest(conv: Conversation, viewer: str) -> Callable[[MessageService], object]:
    def call(service: MessageService) -> list[Entry]:
        entries = service.pull_latest(conv.id, viewer, 20)
        _expect(len(entries) == min(20, conv.size), f"pull_latest of {conv.id}")
        return entries

    return call


def _raw_latest(conv_id: str, viewer: str) -> Callable[[Target], Thunk]:
    def prepare(target: Target) -> Thunk:
        raw = target.raw
        if raw is None:
            raise BenchCheckFailed("no raw arm for this backend")
        return lambda: raw.pull_latest(conv_id, viewer, 20)

    return prepare


def _range(data: Dataset) -> list[Op]:
    rng = data.rng("pull_range")
    big = [c for c in data.conversations if c.size >= 100]

    def call(conv: Conversation, viewer: str, first: int) -> Callable[[MessageService], object]:
        return lambda service: service.pull_range(conv.id, viewer, first, first + 99)

    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(big)
        ops.append(
            _service_op(call(conv, rng.choice(conv.members), rng.randint(1, conv.size - 99)), 100)
        )
    return ops


def _scattered(data: Dataset) -> list[Op]:
    rng = data.rng("pull_scattered")
    big = [c for c in data.conversations if c.size >= 1_000]
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(big)
        seqs = rng.sample(range(1, conv.size + 1), 20)
        viewer = rng.choice(conv.members)
        ops.append(_service_op(_pull(conv.id, viewer, seqs), 20))
    return ops


def _pull(conv_id: str, viewer: str, seqs: list[int]) -> Callable[[MessageService], object]:
    return lambda service: service.pull(conv_id, viewer, seqs)


def _revoke(data: Dataset) -> list[Op]:
    """Senders revoke one of their own messages."""
    rng = data.rng("revoke")
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(data.conversations)
        seq = rng.randint(1, conv.size)
        actor = Actor(data.sender(conv, seq))
        ops.append(_service_op(_revoke_call(conv.id, seq, actor)))
    return ops


def _revoke_call(conv_id: str, seq: int, actor: Actor) -> Callable[[MessageService], object]:
    return lambda service: service.revoke(conv_id, seq, actor, nickname="bench")


def _delete(data: Dataset) -> list[Op]:
    """A member deletes 1–5 messages of a conversation for themselves."""
    rng = data.rng("delete_for_me")
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(data.conversations)
        seqs = rng.sample(range(1, conv.size + 1), min(conv.size, rng.randint(1, 5)))
        ops.append(_service_op(_delete_call(conv.id, seqs, rng.choice(conv.members)), len(seqs)))
    return ops


def _delete_call(conv_id: str, seqs: list[int], user: str) -> Callable[[MessageService], object]:
    return lambda service: service.delete_for_me(conv_id, seqs, user)


def _hot_delete(data: Dataset) -> list[Op]:
    """Members of the largest group delete its newest message, one after another."""
    conv = data.largest
    users = conv.members[: data.scale.hot_deleters]
    return [_service_op(_delete_call(conv.id, [conv.size], user)) for user in users]


def _mark_read(data: Dataset) -> list[Op]:
    """In 1:1 chats a member marks the latest (up to 20) messages read."""
    singles, _ = _split(data)
    rng = data.rng("mark_read")
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(singles)
        seqs = list(range(max(1, conv.size - 19), conv.size + 1))
        ops.append(_service_op(_read_call(conv.id, seqs, rng.choice(conv.members)), len(seqs)))
    return ops


def _read_call(conv_id: str, seqs: list[int], user: str) -> Callable[[MessageService], object]:
    return lambda service: service.mark_read(conv_id, seqs, user)


def _purge(data: Dataset) -> list[Op]:
    """An app admin physically deletes 1–5 messages of a group."""
    _, groups = _split(data)
    rng = data.rng("purge")
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(groups)
        seqs = rng.sample(range(1, conv.size), rng.randint(1, 5))
        ops.append(_service_op(_purge_call(conv.id, seqs), len(seqs)))
    return ops


def _purge_call(conv_id: str, seqs: list[int]) -> Callable[[MessageService], object]:
    return lambda service: service.purge(conv_id, seqs, ADMIN)


def _clear(data: Dataset, largest: bool) -> list[Op]:
    rng = data.rng("clear_largest" if largest else "clear_small")
    if largest:
        conv = data.largest
        users = rng.sample(conv.members, min(len(conv.members), data.scale.ops))
        return [_service_op(_clear_call(conv.id, user)) for user in users]
    small = [c for c in data.conversations if c.size <= 100]
    ops = []
    for _ in range(data.scale.ops):
        conv = rng.choice(small)
        ops.append(_service_op(_clear_call(conv.id, rng.choice(conv.members))))
    return ops


def _clear_call(conv_id: str, user: str) -> Callable[[MessageService], object]:
    return lambda service: service.clear_history(conv_id, user)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "ingest",
        "ingest",
        "consumer batches of ≤100 messages per conversation, conversations interleaved",
        _ingest(lambda data: data.batches(), redelivery=False),
    ),
    Workload(
        "redeliver",
        "redelivery",
        "a sample of the same batches delivered again (all duplicates, nothing written)",
        _ingest(_redelivered, redelivery=True),
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
        "the same pulls as one hand-written driver query, no service (sql-row only)",
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
        "hot_delete",
        "hot message deleted by many",
        "members of the largest group delete its newest message, one after another",
        _hot_delete,
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
