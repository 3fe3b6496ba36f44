"""Check a recorded history (imbucket.testing.histories) against the reference model.

Properties checked, each broken one reported as a readable line (an anomaly):

- every acknowledged write is visible to every pull that starts after its acknowledgement,
  later by at most the pulling client's staleness bound (``Operation.bound``: 0 for a pull
  that reads the store, the cache's staleness bound for a cached one);
- every pull's entries are ones the reference model (``ReferenceConversation``) shows for
  some set of the writes that may precede the pull: a write that ended before the pull (by
  more than the bound) surely precedes it, one that started before the pull ended may, and
  one whose outcome is unknown may, from its start on, for ever;
- no acknowledged message is lost (the final pulls must show each one), no seq holds two
  messages, and no client_msg_id is stored at two seqs: a send whose outcome is unknown, and
  its retry, took effect once or not at all; once a pull showed a message, every pull that
  starts later (by more than its bound) shows it too;
- pull_latest's range ends at a max_seq the writes allow, and starts at the viewer's floor
  or count seqs below; no call fails with an error other than StoreUnavailable (every call
  the harness makes is valid), but for a send told ``WriteConflict`` ("… was sent as seq N,
  since purged"): the retry of a send whose outcome was unknown, which may find that its
  first attempt stored the message and a purge, acknowledged or not, that may have run since
  removed it; or a send overlapped by a purge of seq N, which may purge the seq between the
  send's claim and its insert. Such a send counts as a write of unknown outcome (it may have
  allocated seqs and stored the rest of its batch).

The search is bounded, per seq rather than per order of writes: the writes that may touch a
seq are reduced to their effects on it (allocated, message stored and which one, revoked,
deleted for the viewer, read, purged, cleared for the viewer), each effect is sure, possible
or impossible for the pull, and every combination of the possible ones is applied to a
ReferenceConversation through its use cases; the views it gives are the admissible ones.
This ignores order between effects on one seq, so it may accept a pull that no single order
explains; it never reports an anomaly that some order explains.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from imbucket.domain.errors import NotPermitted
from imbucket.domain.model import Actor, Role
from imbucket.testing.histories import (
    CLEAR,
    DELETE,
    FAIL,
    INGEST,
    MARK_READ,
    MODERATOR,
    OK,
    PULL,
    PULL_LATEST,
    PULL_RANGE,
    PULLS,
    PURGE,
    RECIPIENT,
    REVOKE,
    SEND,
    SENDER,
    UNKNOWN,
    WRITES,
    Operation,
    Seen,
    ingested,
)
from imbucket.testing.reference import ReferenceConversation

INFINITY = float("inf")
NO, YES, EITHER = (False,), (True,), (False, True)
ANY_ID = "?"  # the client_msg_id of a model view: which message it is is checked apart
EXAMPLES = 3  # writes listed per anomaly


@dataclass(frozen=True, slots=True)
class Effect:
    """What one write may have done to one seq; ``end`` None: never acknowledged."""

    kind: str  # "message", REVOKE, DELETE, MARK_READ or PURGE
    operation: Operation
    end: float | None
    user: str = ""
    client_msg_id: str = ""

    def sure(self, pull: Operation) -> bool:
        """Whether it surely precedes pull (acknowledged before pull started, by the bound)."""
        return self.end is not None and self.end + pull.bound <= pull.start

    def possible(self, pull: Operation) -> bool:
        """Whether it may precede pull: it started before pull ended."""
        return self.operation.start < _end(pull)


def _end(operation: Operation) -> float:
    return INFINITY if operation.end is None else operation.end


@dataclass
class _Conversation:
    """One conversation's writes, indexed for the per-seq questions of the check."""

    effects: dict[int, list[Effect]] = field(default_factory=lambda: defaultdict(list))
    proven: list[tuple[float, int]] = field(default_factory=list)  # (end, seqs allocated)
    raised: list[tuple[float, float]] = field(default_factory=list)  # (start, max_seq at most)
    clears: dict[str, list[Effect]] = field(default_factory=lambda: defaultdict(list))
    floating: list[tuple[float, str]] = field(default_factory=list)  # unknown sends' ids
    owners: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    _proven_ends: list[float] = field(default_factory=list)
    _proven_tops: list[int] = field(default_factory=list)
    _raised_starts: list[float] = field(default_factory=list)
    _raised_tops: list[float] = field(default_factory=list)

    def index(self) -> None:
        """Sort the allocation bounds for bisection (after every write was added)."""
        self.proven.sort()
        self._proven_ends = [end for end, _ in self.proven]
        self._proven_tops = list(itertools.accumulate((top for _, top in self.proven), max))
        self.raised.sort()
        self._raised_starts = [start for start, _ in self.raised]
        self._raised_tops = list(itertools.accumulate((top for _, top in self.raised), max))

    def allocated(self, seq: int, pull: Operation) -> tuple[bool, ...]:
        """Whether seq is allocated for pull: surely, possibly, or surely not."""
        sure = bisect.bisect_right(self._proven_ends, pull.start - pull.bound)
        if sure and self._proven_tops[sure - 1] >= seq:
            return YES
        possible = bisect.bisect_left(self._raised_starts, _end(pull))
        return EITHER if possible and self._raised_tops[possible - 1] >= seq else NO

    def cleared(self, seq: int, pull: Operation) -> tuple[bool, ...]:
        """Whether seq is below the viewer's floor for pull."""
        clears = [c for c in self.clears[pull.call.user] if c.possible(pull)]
        below = [c for c in clears if c.operation.outcome == UNKNOWN or c.operation.number > seq]
        if any(c.sure(pull) and c.operation.number > seq for c in below):
            return YES
        return EITHER if below else NO


def _history(operations: Sequence[Operation]) -> dict[str, _Conversation]:
    """The writes of operations by conversation; observed messages count as written then."""
    conversations: dict[str, _Conversation] = defaultdict(_Conversation)
    placed = {cid for op in operations if op.outcome == OK for _, cid in op.placed}
    for operation in operations:
        if operation.call.kind in WRITES and (
            operation.outcome != FAIL or _purged_while_sending(operation, operations)
        ):
            _add_write(conversations[operation.call.conversation_id], operation, placed)
    for seq, client_msg_id, pull in _first_sightings(operations):
        conversation = conversations[pull.call.conversation_id]
        writes = [
            op
            for op in operations
            if op.call.kind in (SEND, INGEST)
            and op.call.conversation_id == pull.call.conversation_id
            and client_msg_id in op.call.ids
        ]
        if not writes:
            continue  # no call wrote it: the pull's own check reports it
        # Visible from the first sighting on, or from the end of the call that wrote it: its
        # invalidations ran until then. A writer killed mid call never ends: the sighting counts.
        ends = [-INFINITY if op.end is None else op.end for op in writes]
        end = max(_end(pull), min(ends))
        conversation.effects[seq].append(Effect("message", pull, end, "", client_msg_id))
        conversation.proven.append((end, seq))
    for conversation in conversations.values():
        conversation.index()
    return conversations


def _add_write(conversation: _Conversation, operation: Operation, placed: set[str]) -> None:
    call, acked = operation.call, operation.outcome == OK
    end = operation.end if acked else None
    if call.kind == SEND:
        for seq, client_msg_id in operation.placed:
            conversation.effects[seq].append(Effect("message", operation, end, "", client_msg_id))
            conversation.owners[seq].add(client_msg_id)
        top = max((seq for seq, _ in operation.placed), default=0) if acked else INFINITY
        conversation.raised.append((operation.start, top))
        if not acked:
            loose = [cid for cid in call.ids if cid not in placed]
            conversation.floating.extend((operation.start, cid) for cid in loose)
    elif call.kind == CLEAR:
        conversation.clears[call.user].append(Effect(CLEAR, operation, end, call.user))
        if acked and operation.end is not None:  # the floor is max_seq + 1 at the clear
            conversation.proven.append((operation.end, operation.number - 1))
        return
    else:
        kind = "message" if call.kind == INGEST else call.kind
        ids = call.ids if call.kind == INGEST else ("",) * len(call.seqs)
        for seq, client_msg_id in zip(call.seqs, ids, strict=True):
            conversation.effects[seq].append(Effect(kind, operation, end, call.user, client_msg_id))
        conversation.raised.append((operation.start, max(call.seqs)))
    if acked and operation.end is not None:
        tops = [seq for seq, _ in operation.placed] + list(call.seqs)
        conversation.proven.append((operation.end, max(tops, default=0)))


def _first_sightings(operations: Sequence[Operation]) -> list[tuple[int, str, Operation]]:
    """(seq, client_msg_id, the pull that showed it first) of every message pulled."""
    first: dict[tuple[str, int, str], Operation] = {}
    for pull in operations:
        if pull.call.kind not in PULLS or pull.outcome != OK:
            continue
        for seen in pull.seen:
            if seen.state == "message":
                key = (pull.call.conversation_id, seen.seq, seen.client_msg_id)
                if key not in first or _end(pull) < _end(first[key]):
                    first[key] = pull
    return [(seq, cid, pull) for (_, seq, cid), pull in first.items()]


def check(operations: Sequence[Operation]) -> list[str]:
    """Every anomaly of the history, one readable line each (none: the history is admissible)."""
    conversations = _history(operations)
    anomalies = [
        f"{op} raised {op.error}"
        for op in operations
        if op.outcome == FAIL
        and not _purged_since_unknown_send(op, operations)
        and not _purged_while_sending(op, operations)
    ]
    anomalies.extend(_identities(operations))
    for pull in operations:
        if pull.call.kind in PULLS and pull.outcome == OK:
            anomalies.extend(_check_pull(conversations[pull.call.conversation_id], pull))
    return anomalies


_PURGED_SEND = re.compile(r"^WriteConflict: client_msg_id .* was sent as seq (\d+), since purged$")


def _purged_since_unknown_send(failed: Operation, operations: Sequence[Operation]) -> bool:
    """Whether failed is a send's retry told that its message was stored, then purged.

    Admissible when the same client made the same send before with an unknown outcome, and a
    purge of that seq (acknowledged or not) started before the retry ended.
    """
    found = _PURGED_SEND.match(failed.error)
    if failed.call.kind != SEND or found is None:
        return False
    seq, end = int(found[1]), _end(failed)
    first_attempt = any(
        op.client == failed.client and op.call == failed.call and op.outcome == UNKNOWN
        for op in operations
        if op.start < failed.start
    )
    purged = any(
        op.call.kind == PURGE
        and op.call.conversation_id == failed.call.conversation_id
        and seq in op.call.seqs
        and op.outcome != FAIL
        and op.start < end
        for op in operations
    )
    return first_attempt and purged


def _purged_while_sending(failed: Operation, operations: Sequence[Operation]) -> bool:
    """Whether failed is a send told its seq was purged by a purge that overlapped it.

    A send claims its seq before it stores the message there; a purge of that seq in between
    (acknowledged or not) leaves a final tombstone that the send's insert finds.
    """
    found = _PURGED_SEND.match(failed.error)
    if failed.call.kind != SEND or found is None:
        return False
    seq, end = int(found[1]), _end(failed)
    return any(
        op.call.kind == PURGE
        and op.call.conversation_id == failed.call.conversation_id
        and seq in op.call.seqs
        and op.outcome != FAIL
        and op.start < end
        and _end(op) > failed.start
        for op in operations
    )


def _identities(operations: Sequence[Operation]) -> list[str]:
    """A seq holding two messages, a client_msg_id at two seqs (over sends and pulls)."""
    by_seq: dict[tuple[str, int], set[str]] = defaultdict(set)
    by_id: dict[tuple[str, str], set[int]] = defaultdict(set)
    for operation in operations:
        shown = [(s.seq, s.client_msg_id) for s in operation.seen if s.state == "message"]
        if operation.outcome == OK:
            shown.extend(operation.placed)
        for seq, client_msg_id in shown:
            by_seq[operation.call.conversation_id, seq].add(client_msg_id)
            by_id[operation.call.conversation_id, client_msg_id].add(seq)
    twice = [
        f"{conversation} seq {seq} holds two messages: {', '.join(sorted(ids))}"
        for (conversation, seq), ids in sorted(by_seq.items())
        if len(ids) > 1
    ]
    return twice + [
        f"{conversation} client_msg_id {cid} is stored at seqs {sorted(seqs)}"
        for (conversation, cid), seqs in sorted(by_id.items())
        if len(seqs) > 1
    ]


def _check_pull(conversation: _Conversation, pull: Operation) -> list[str]:
    shape = _requested(pull)
    if shape is not None:
        return [f"{pull} answered {shape}"]
    latest = pull.call.kind == PULL_LATEST
    anomalies = [
        f"{pull} {problem}"
        for seen in pull.seen
        if (problem := _check_seen(conversation, pull, seen, latest)) is not None
    ]
    if latest:
        anomalies.extend(f"{pull} {problem}" for problem in _latest_bounds(conversation, pull))
    return anomalies


def _requested(pull: Operation) -> str | None:
    """What is wrong with the seqs of pull's answer, if anything."""
    seqs = [seen.seq for seen in pull.seen]
    call = pull.call
    if call.kind == PULL:
        wanted = list(call.seqs)
    elif call.kind == PULL_RANGE:
        wanted = list(range(call.seqs[0], call.seqs[-1] + 1))
    else:
        wanted = list(range(seqs[0], seqs[0] + len(seqs))) if seqs else []
        if len(seqs) > call.count:
            return f"{len(seqs)} entries for count {call.count}"
    return None if seqs == wanted else f"seqs {seqs}, not {wanted}"


def _latest_bounds(conversation: _Conversation, pull: Operation) -> list[str]:
    """pull_latest's first and last seq against the watermarks the writes allow."""
    seqs = [seen.seq for seen in pull.seen]
    if not seqs:
        if conversation.allocated(1, pull) == YES and conversation.cleared(1, pull) == NO:
            return ["showed nothing although seqs are allocated and not cleared"]
        return []
    problems = []
    if conversation.allocated(seqs[-1] + 1, pull) == YES:
        problems.append(f"ends at seq {seqs[-1]} although seq {seqs[-1] + 1} is allocated")
    floor = seqs[0] if len(seqs) < pull.call.count else 1
    if floor > 1 and True not in conversation.cleared(floor - 1, pull):
        problems.append(f"starts at seq {seqs[0]} although seq {seqs[0] - 1} is not cleared")
    return problems


@dataclass(frozen=True, slots=True)
class _Options:
    """Per effect on one seq, the values it may have for one pull."""

    allocated: tuple[bool, ...]
    present: tuple[bool, ...]
    deleted: tuple[bool, ...]
    read: tuple[bool, ...]
    purged: tuple[bool, ...]
    revoked: tuple[bool, ...]
    cleared: tuple[bool, ...]


def _check_seen(
    conversation: _Conversation, pull: Operation, seen: Seen, latest: bool
) -> str | None:
    """What is wrong with one pulled entry, if anything."""
    options, candidates, sure = _options(conversation, pull, seen.seq)
    if latest:  # pull_latest shows allocated seqs above the floor only
        options = replace(
            options,
            allocated=tuple(v for v in options.allocated if v),
            cleared=tuple(v for v in options.cleared if not v),
        )
    admissible = _views(options)
    shown = (
        replace(seen, seq=0, client_msg_id=ANY_ID)
        if seen.state == "message"
        else replace(seen, seq=0)
    )
    if shown in admissible and (seen.state != "message" or seen.client_msg_id in candidates):
        return None
    allowed = " | ".join(sorted(_named(view, candidates) for view in admissible)) or "nothing"
    before = "; ".join(_cause(e) for e in sure[-EXAMPLES:]) or "none"
    return (
        f"seq {seen.seq} showed {seen}; admissible: {allowed}; "
        f"writes on it acknowledged before the pull: {before}"
    )


def _cause(effect: Effect) -> str:
    if effect.operation.call.kind in PULLS:
        return f"{effect.client_msg_id} shown by {effect.operation}"
    return str(effect.operation)


def _named(view: Seen, candidates: Iterable[str]) -> str:
    if view.state != "message":
        return str(view)
    return " or ".join(str(replace(view, client_msg_id=cid)) for cid in sorted(candidates))


def _options(
    conversation: _Conversation, pull: Operation, seq: int
) -> tuple[_Options, set[str], list[Effect]]:
    """The options of each effect on seq for pull, the messages it may hold, the sure writes."""
    viewer = pull.call.user
    effects = [e for e in conversation.effects.get(seq, ()) if e.possible(pull)]
    sure = [e for e in effects if e.sure(pull)]

    def option(kind: str, user: str | None = None) -> tuple[bool, ...]:
        mine = [e for e in effects if e.kind == kind and (user is None or e.user == user)]
        return YES if any(e.sure(pull) for e in mine) else EITHER if mine else NO

    messages = [e for e in effects if e.kind == "message"]
    candidates = {e.client_msg_id for e in messages}
    if not conversation.owners.get(seq):
        candidates.update(cid for start, cid in conversation.floating if start < _end(pull))
    present = YES if any(e.sure(pull) for e in messages) else EITHER if candidates else NO
    options = _Options(
        allocated=conversation.allocated(seq, pull),
        present=present,
        deleted=option(DELETE, viewer),
        read=option(MARK_READ, RECIPIENT),
        purged=option(PURGE),
        revoked=option(REVOKE),
        cleared=conversation.cleared(seq, pull),
    )
    return options, candidates, sure


@functools.cache
def _views(options: _Options) -> frozenset[Seen]:
    """What the reference model shows of one seq for every combination of the options."""
    combinations = itertools.product(
        options.allocated,
        options.present,
        options.deleted,
        options.read,
        options.purged,
        options.revoked,
        options.cleared,
    )
    views = {_model_view(*combination) for combination in combinations}
    views.discard(None)
    return frozenset(view for view in views if view is not None)


_CONVERSATION = "history-check"
_VIEWER = "viewer"


def _model_view(
    allocated: bool,
    present: bool,
    deleted: bool,
    read: bool,
    purged: bool,
    revoked: bool,
    cleared: bool,
) -> Seen | None:
    """The reference model's view of seq 1 after those effects (None: no order gives them)."""
    model = ReferenceConversation(_CONVERSATION)
    if present:
        model.ingest([ingested(_CONVERSATION, 1)])
    model.max_seq = 1
    if deleted:
        model.delete_for([1], _VIEWER)
    if read:
        model.mark_read([1], RECIPIENT)
    if purged:
        model.purge([1], MODERATOR)
    if revoked:
        try:
            model.revoke(1, Actor(SENDER), Role.MEMBER)
        except NotPermitted:  # a member revokes a stored message only
            return None
    if cleared:
        model.clear_history(_VIEWER)
    if not allocated:
        model.max_seq = 0
    seen = Seen.of(model.view(_VIEWER, [1])[0])
    return (
        replace(seen, seq=0, client_msg_id=ANY_ID)
        if seen.state == "message"
        else replace(seen, seq=0)
    )
