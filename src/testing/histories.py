"""Histories of concurrent calls on MessageServices, recorded for the checker.

A history is every call each client made: what it asked (``Call``), when it started and
ended (``time.monotonic``: one clock for all the processes of a machine), and its answer, or
that its outcome is unknown (a ``StoreUnavailable``: the write may have been applied, once or
not at all). ``imbucket.testing.history_check.check`` checks a history against the reference
model. Clients are threads (``run_threads``) or processes (``write_from_process`` appends one
JSON line when a call starts and one when it ends, so that a writer SIGKILLed mid call
leaves that call behind as unknown; ``read_log`` reads the lines back).

Every client works on the same few conversations: ``Workload.conversation_id`` takes sends,
``Workload.ingest_id`` ingests (seqs set by the caller, redelivered by several clients), and
both take revokes, deletes, mark-reads, clears, purges and pulls. All messages are single-chat
messages from SENDER to RECIPIENT, so that a pull shows whether each one was read.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from imbucket.app import MessageService, open_service
from imbucket.domain.errors import ImbucketError, StoreUnavailable
from imbucket.domain.model import Actor, Draft, Message, Role, SessionType
from imbucket.domain.projection import Entry, MessageView
from imbucket.testing.factories import message

SEND, INGEST, REVOKE, DELETE, MARK_READ, CLEAR, PURGE = (
    "send",
    "ingest",
    "revoke",
    "delete_for_me",
    "mark_read",
    "clear_history",
    "purge",
)
PULL, PULL_RANGE, PULL_LATEST = "pull", "pull_range", "pull_latest"
WRITES = frozenset({SEND, INGEST, REVOKE, DELETE, MARK_READ, CLEAR, PURGE})
PULLS = frozenset({PULL, PULL_RANGE, PULL_LATEST})
OK, FAIL, UNKNOWN = "ok", "fail", "unknown"

SENDER, RECIPIENT, OTHER = "alice", "bob", "carol"
VIEWERS = (SENDER, RECIPIENT, OTHER)
MODERATOR = Actor("admin", Role.APP_ADMIN)
# What a writer and a reader do, by weight.
WRITER_MIX: Mapping[str, int] = {
    SEND: 30,
    INGEST: 12,
    REVOKE: 10,
    DELETE: 12,
    MARK_READ: 12,
    PURGE: 4,
    CLEAR: 1,
    PULL_LATEST: 12,
    PULL_RANGE: 7,
}
READER_MIX: Mapping[str, int] = {PULL_LATEST: 40, PULL_RANGE: 35, PULL: 25}
LATEST = 20  # pull_latest's count
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # imbucket's files
WINDOW = 12  # at most this many seqs per tag write or pull


@dataclass(frozen=True, slots=True)
class Seen:
    """One pulled entry as the checker compares it: the seq and what it showed there.

    ``state`` is a TombstoneReason value or "message"; for a message, its client_msg_id,
    who revoked it ("" for nobody) and whether it shows as read.
    """

    seq: int
    state: str
    client_msg_id: str = ""
    revoked_by: str = ""
    read: bool | None = None

    @classmethod
    def of(cls, entry: Entry) -> Seen:
        """The Seen of a pulled entry."""
        if isinstance(entry, MessageView):
            revoker = entry.revoked.user_id if entry.revoked is not None else ""
            return cls(entry.seq, "message", entry.message.client_msg_id, revoker, entry.is_read)
        return cls(entry.seq, entry.reason.value)

    def __str__(self) -> str:
        if self.state != "message":
            return self.state
        revoked = f" revoked by {self.revoked_by}" if self.revoked_by else ""
        read = {True: " read", False: " unread", None: ""}[self.read]
        return f"message {self.client_msg_id}{revoked}{read}"


@dataclass(frozen=True, slots=True)
class Call:
    """What a client asked: the use case, its conversation and arguments.

    ``user`` is the viewer, the user, the reader or the revoker; ``ids`` the client_msg_ids
    a send or an ingest stores (in ``seqs``' order for an ingest); ``count`` pull_latest's.
    """

    kind: str
    conversation_id: str
    user: str = ""
    seqs: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()
    count: int = 0


@dataclass(frozen=True, slots=True)
class Operation:
    """One call of a history and what came of it.

    ``end`` is None when the call never ended (its process was killed). ``outcome`` is OK,
    FAIL (an error that promises nothing was written) or UNKNOWN (StoreUnavailable, or never
    ended). Answers: ``seen`` a pull's entries, ``placed`` a send's (seq, client_msg_id)s,
    ``number`` the int others return (a revoke: 1 for True). ``bound`` is how many seconds
    this client's pulls may lag behind acknowledged writes (its cache's staleness bound).
    """

    client: str
    call: Call
    start: float
    end: float | None
    outcome: str
    seen: tuple[Seen, ...] = ()
    placed: tuple[tuple[int, str], ...] = ()
    number: int = 0
    error: str = ""
    bound: float = 0.0

    def __str__(self) -> str:
        call = self.call
        args = [call.conversation_id]
        if call.user:
            args.append(call.user)
        if call.seqs:
            args.append(_seqs(call.seqs))
        if call.ids and call.kind == SEND:
            args.append(",".join(call.ids))
        if call.count:
            args.append(f"count={call.count}")
        end = "never" if self.end is None else f"{self.end:.3f}"
        return f"{self.client}: {call.kind}({', '.join(args)}) [{self.start:.3f}, {end}]"


def _seqs(seqs: Sequence[int]) -> str:
    return f"seqs {','.join(map(str, seqs))}" if len(seqs) < 6 else f"seqs {seqs[0]}..{seqs[-1]}"


class Recorder:
    """Runs calls and records them; thread-safe. ``sink`` also gets each start and end line."""

    def __init__(self, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.operations: list[Operation] = []
        self._sink = sink
        self._lock = threading.Lock()
        self._count = 0

    def record(
        self, client: str, call: Call, run: Callable[[], object], bound: float = 0.0
    ) -> Operation:
        """Run run() as client's call and record its interval and answer (never raises)."""
        with self._lock:
            self._count += 1
            number = self._count
        start = time.monotonic()
        if self._sink is not None:  # before the call: a process killed in it leaves this line
            self._sink(
                {
                    "n": number,
                    "client": client,
                    "call": asdict(call),
                    "bound": bound,
                    "start": start,
                }
            )
        try:
            answer = run()
        except StoreUnavailable as error:
            operation = _failed(client, call, start, UNKNOWN, error, bound)
        except Exception as error:  # the checker reports it: every call made is valid
            operation = _failed(client, call, start, FAIL, error, bound)
        else:
            operation = _answered(client, call, start, answer, bound)
        if self._sink is not None:
            self._sink({"n": number, **_end_json(operation)})
        with self._lock:
            self.operations.append(operation)
        return operation

    def count(self) -> int:
        """How many calls have ended."""
        with self._lock:
            return len(self.operations)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Wait (bounded) until count calls have ended; whether they have."""
        deadline = time.monotonic() + timeout
        while self.count() < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


def _failed(
    client: str, call: Call, start: float, outcome: str, error: Exception, bound: float
) -> Operation:
    text = f"{type(error).__name__}: {error}"
    if not isinstance(error, ImbucketError):  # a bug: where it was raised, for the report
        frames = traceback.extract_tb(error.__traceback__)
        ours = [frame for frame in frames if frame.filename.startswith(_PACKAGE)] or frames
        text += f" (in {ours[-1].name}, {ours[-1].filename}:{ours[-1].lineno})"
    return Operation(client, call, start, time.monotonic(), outcome, error=text, bound=bound)


def _answered(client: str, call: Call, start: float, answer: object, bound: float) -> Operation:
    end = time.monotonic()
    if call.kind in PULLS:
        seen = tuple(Seen.of(entry) for entry in answer)  # type: ignore[attr-defined]
        return Operation(client, call, start, end, OK, seen=seen, bound=bound)
    if call.kind == SEND:
        placed = tuple((m.seq, m.client_msg_id) for m in answer)  # type: ignore[attr-defined]
        return Operation(client, call, start, end, OK, placed=placed, bound=bound)
    number = int(answer) if isinstance(answer, (bool, int)) else 0
    return Operation(client, call, start, end, OK, number=number, bound=bound)


def draft(client_msg_id: str) -> Draft:
    """The draft a history's send stores for client_msg_id."""
    return Draft(
        send_id=SENDER,
        recv_id=RECIPIENT,
        content=f"text of {client_msg_id}",
        client_msg_id=client_msg_id,
        session_type=SessionType.SINGLE,
    )


def ingested(conversation_id: str, seq: int) -> Message:
    """The message a history's ingests store at seq (the same one from every client)."""
    return message(
        seq,
        conversation_id,
        send_id=SENDER,
        recv_id=RECIPIENT,
        group_id="",
        session_type=SessionType.SINGLE,
    )


def perform(service: MessageService, call: Call) -> object:
    """Make call on service; its answer."""
    conversation, seqs = call.conversation_id, list(call.seqs)
    actions: dict[str, Callable[[], object]] = {
        SEND: lambda: service.send(conversation, [draft(i) for i in call.ids]),
        INGEST: lambda: service.ingest(conversation, [ingested(conversation, s) for s in seqs]),
        REVOKE: lambda: service.revoke(conversation, seqs[0], Actor(call.user)),
        DELETE: lambda: service.delete_for_me(conversation, seqs, call.user),
        MARK_READ: lambda: service.mark_read(conversation, seqs, call.user),
        CLEAR: lambda: service.clear_history(conversation, call.user),
        PURGE: lambda: service.purge(conversation, seqs, MODERATOR),
        PULL: lambda: service.pull(conversation, call.user, seqs),
        PULL_RANGE: lambda: service.pull_range(conversation, call.user, seqs[0], seqs[-1]),
        PULL_LATEST: lambda: service.pull_latest(conversation, call.user, call.count),
    }
    return actions[call.kind]()


@dataclass(frozen=True)
class Workload:
    """The conversations, and how many calls (at most) each client makes in how long."""

    conversation_id: str
    ingest_id: str
    operations: int = 300
    seconds: float = 8.0
    seed: int = 0


@dataclass
class _Known:
    """What a client knows of one conversation: allocated seqs and seqs holding a message."""

    allocated: int = 0
    messages: set[int] = field(default_factory=set)
    ingested: int = 0

    def learn(self, operation: Operation) -> None:
        if operation.outcome != OK:
            return
        if operation.call.kind == SEND:
            self.messages.update(seq for seq, _ in operation.placed)
        elif operation.call.kind == INGEST:
            self.messages.update(operation.call.seqs)
            self.ingested = max(self.ingested, *operation.call.seqs)
        for seen in operation.seen:
            if seen.state == "message":
                self.messages.add(seen.seq)
        top = max(self.messages, default=0)
        allocated = [s.seq for s in operation.seen if s.state not in ("unallocated", "cleared")]
        self.allocated = max(self.allocated, top, *allocated, 0)


class Client:
    """One client's calls: chosen at random (seeded) from a mix, on what it knows so far."""

    def __init__(self, name: str, workload: Workload, mix: Mapping[str, int]) -> None:
        self.name = name
        self.workload = workload
        self._kinds, self._weights = list(mix), list(mix.values())
        self._rng = random.Random(f"{workload.seed}:{name}")
        self._known = {workload.conversation_id: _Known(), workload.ingest_id: _Known()}
        self._sent = 0

    def learn(self, operation: Operation) -> None:
        """Take in what a call of this client showed."""
        self._known[operation.call.conversation_id].learn(operation)

    def next_call(self) -> Call:
        """The next call to make."""
        kind = self._rng.choices(self._kinds, self._weights)[0]
        if kind == SEND:
            return self._send()
        if kind == INGEST:
            return self._ingest()
        conversation = self._rng.choice(list(self._known))
        known = self._known[conversation]
        if kind in PULLS:
            return self._pull(kind, conversation, known)
        if kind == CLEAR:
            return Call(CLEAR, conversation, OTHER)
        if kind == REVOKE:
            if not known.messages:
                return self._send()
            return Call(REVOKE, conversation, SENDER, (self._rng.choice(sorted(known.messages)),))
        if not known.allocated:
            return self._send()
        user = {DELETE: self._rng.choice((RECIPIENT, OTHER)), MARK_READ: RECIPIENT}.get(kind, "")
        count = 1 if kind == PURGE else self._rng.randint(1, 3)
        seqs = sorted({self._rng.randint(1, known.allocated) for _ in range(count)})
        return Call(kind, conversation, user, tuple(seqs))

    def _send(self) -> Call:
        drafts = self._rng.choice((1, 1, 2))
        ids = tuple(f"{self.name}-{self._sent + i}" for i in range(drafts))
        self._sent += drafts
        return Call(SEND, self.workload.conversation_id, ids=ids)

    def _ingest(self) -> Call:
        conversation = self.workload.ingest_id
        first = self._rng.randint(1, self._known[conversation].ingested + 3)
        seqs = tuple(range(first, first + self._rng.randint(1, 3)))
        return Call(INGEST, conversation, seqs=seqs, ids=tuple(f"client-{s}" for s in seqs))

    def _pull(self, kind: str, conversation: str, known: _Known) -> Call:
        viewer = self._rng.choice(VIEWERS)
        if kind == PULL_LATEST:
            return Call(PULL_LATEST, conversation, viewer, count=LATEST)
        top = known.allocated + 3
        if kind == PULL_RANGE:
            first = self._rng.randint(1, max(1, top - WINDOW + 1))
            return Call(PULL_RANGE, conversation, viewer, (first, min(top, first + WINDOW - 1)))
        seqs = self._rng.sample(range(1, top + 1), min(5, top))
        return Call(PULL, conversation, viewer, tuple(seqs))


def run_client(
    service: MessageService,
    recorder: Recorder,
    client: Client,
    bound: float = 0.0,
    stop: threading.Event | None = None,
    pause: float = 0.0,
) -> None:
    """Make client's calls on service until its count or its time is up, or stop is set.

    A send whose outcome is unknown is retried once with the same client_msg_ids, as a
    client would. pause: seconds between two calls (readers that leave writers some CPU).
    """
    deadline = time.monotonic() + client.workload.seconds
    retry: Call | None = None
    for _ in range(client.workload.operations):
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            return
        call = retry or client.next_call()
        operation = recorder.record(client.name, call, partial(perform, service, call), bound)
        client.learn(operation)
        unsettled = operation.outcome == UNKNOWN and call.kind == SEND
        retry = call if unsettled and retry is None else None
        if pause:
            time.sleep(pause)


@dataclass(frozen=True)
class ClientSpec:
    """A thread client: its name, its own service and mix; its pulls' staleness bound."""

    name: str
    service: MessageService
    mix: Mapping[str, int]
    bound: float = 0.0
    pause: float = 0.0


def run_threads(
    specs: Sequence[ClientSpec],
    workload: Workload,
    recorder: Recorder,
    fault: Callable[[], None] = lambda: None,
    join_seconds: float = 120.0,
    until_fault_ends: bool = False,
) -> None:
    """Run one thread per client; call fault() on this thread meanwhile; wait (bounded).

    With until_fault_ends the clients stop when fault() returns (or at their own limits).
    """
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(spec: ClientSpec) -> None:
        try:
            client = Client(spec.name, workload, spec.mix)
            run_client(spec.service, recorder, client, spec.bound, stop, spec.pause)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(spec,), daemon=True) for spec in specs]
    for thread in threads:
        thread.start()
    try:
        fault()
    finally:
        if until_fault_ends:
            stop.set()
        deadline = time.monotonic() + join_seconds
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stop.set()
    if errors:
        raise errors[0]
    assert not any(thread.is_alive() for thread in threads), "a client did not stop in time"


def final_pulls(
    service: MessageService,
    recorder: Recorder,
    workload: Workload,
    client: str = "final",
    bound: float = 0.0,
) -> None:
    """Every viewer pulls every seq ever allocated, once the faults are over."""
    for conversation in (workload.conversation_id, workload.ingest_id):
        top = service.max_seq(conversation)
        for first in range(1, top + 1, 100):
            seqs = (first, min(top, first + 99))
            for viewer in VIEWERS:
                call = Call(PULL_RANGE, conversation, viewer, seqs)
                recorder.record(client, call, partial(perform, service, call), bound)


def write_from_process(
    config: Mapping[str, Any],
    name: str,
    workload: Workload,
    log_path: str,
    mix: Mapping[str, int] = WRITER_MIX,
    bound: float = 0.0,
    prepare: Callable[[MessageService], None] = lambda service: None,
) -> None:
    """A writer process's work: run client name on a service opened on config.

    Each call's start and end go to log_path, one JSON line each, appended with one write.
    prepare(service) runs first: a test's own entry point hooks its faults in there.
    """
    descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def sink(line: dict[str, Any]) -> None:
        os.write(descriptor, (json.dumps(line) + "\n").encode())

    try:
        with open_service(dict(config)) as service:
            prepare(service)
            run_client(service, Recorder(sink), Client(name, workload, mix), bound)
    finally:
        os.close(descriptor)


def read_log(path: str) -> list[Operation]:
    """The operations a writer process logged; a call that never ended is UNKNOWN."""
    begun: dict[int, dict[str, Any]] = {}
    ended: list[Operation] = []
    with open(path, encoding="utf-8") as lines:
        for line in _complete(lines):
            entry = json.loads(line)
            known = begun.setdefault(entry.pop("n"), {})
            known.update(entry)
            if "outcome" in known:
                ended.append(_from_json(known))
    unfinished = [entry for entry in begun.values() if "outcome" not in entry and "start" in entry]
    return ended + [_from_json({**entry, "outcome": UNKNOWN}) for entry in unfinished]


def _complete(lines: Iterable[str]) -> Iterable[str]:
    """The lines written whole (a process killed mid write leaves a last one cut short)."""
    return (line for line in lines if line.endswith("\n"))


def _end_json(operation: Operation) -> dict[str, Any]:
    return {
        "end": operation.end,
        "outcome": operation.outcome,
        "seen": [asdict(seen) for seen in operation.seen],
        "placed": [list(pair) for pair in operation.placed],
        "number": operation.number,
        "error": operation.error,
    }


def _from_json(entry: Mapping[str, Any]) -> Operation:
    raw = entry["call"]
    call = Call(
        raw["kind"],
        raw["conversation_id"],
        raw["user"],
        tuple(raw["seqs"]),
        tuple(raw["ids"]),
        raw["count"],
    )
    return Operation(
        entry["client"],
        call,
        entry["start"],
        entry.get("end"),
        entry["outcome"],
        seen=tuple(Seen(**seen) for seen in entry.get("seen", ())),
        placed=tuple((seq, cid) for seq, cid in entry.get("placed", ())),
        number=entry.get("number", 0),
        error=entry.get("error", ""),
        bound=entry["bound"],
    )
