"""Writers that send and tag under a fault, remembering only what was acknowledged.

Each writer thread owns one conversation and a service of its own (as a separate process
would): it sends one message at a time and, after every second acknowledged send, deletes
the previous acknowledged message for the tagging user (a tag write). A call that fails is
counted and the loop goes on; only acknowledged sends and tags are kept, and each loop is
bounded by a number of operations and a deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from imbucket.app import MessageService
from imbucket.domain.errors import ImbucketError
from imbucket.domain.model import Draft, SessionType
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason

TAGGER = "carol"
VIEWER = "bob"
MAX_OPS = 5000  # per writer, whatever happens


@dataclass
class Writer:
    """One thread's conversation and what the store acknowledged to it."""

    conversation: str
    sent: dict[int, str] = field(default_factory=dict)  # seq -> content
    tagged: set[int] = field(default_factory=set)  # seqs deleted for TAGGER
    failures: list[str] = field(default_factory=list)
    unsettled: list[Draft] = field(default_factory=list)  # sends that raised
    acks_at: list[float] = field(default_factory=list)  # monotonic time of each ack

    def run(self, open_service: Callable[[], MessageService], stop: threading.Event) -> None:
        service = open_service()
        deadline = time.monotonic() + 300
        try:
            for n in range(MAX_OPS):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                self._step(service, n)
        finally:
            service.close()

    def _step(self, service: MessageService, n: int) -> None:
        content = f"{self.conversation} message {n}"
        draft = Draft(
            send_id="alice",
            content=content,
            client_msg_id=f"m{n}",
            session_type=SessionType.GROUP,
            group_id=self.conversation,
        )
        try:
            [message] = service.send(self.conversation, [draft])
        except ImbucketError as error:
            self.failures.append(f"send {n}: {type(error).__name__}: {error}")
            self.unsettled.append(draft)
            return
        self.sent[message.seq] = content
        self.acks_at.append(time.monotonic())
        if len(self.sent) % 2 == 0:
            earlier = sorted(self.sent)[-2]
            try:
                service.delete_for_me(self.conversation, [earlier], TAGGER)
            except ImbucketError as error:
                self.failures.append(f"tag {earlier}: {type(error).__name__}: {error}")
                return
            self.tagged.add(earlier)


def settle(service: MessageService, writer: Writer) -> list[str]:
    """Send each unsettled draft again (same client_msg_id), as a client would after an error.

    Returns what breaks the lost-reply rules: the retry must be acknowledged, and its
    content stored at exactly one seq, whether or not the failed attempt had stored it.
    """
    problems = []
    for draft in writer.unsettled:
        [message] = service.send(writer.conversation, [draft])
        writer.sent[message.seq] = draft.content
        last = service.max_seq(writer.conversation)
        seqs = list(range(1, last + 1))
        copies = [
            e.seq
            for e in service.pull(writer.conversation, VIEWER, seqs)
            if isinstance(e, MessageView) and e.content == draft.content
        ]
        if copies != [message.seq]:
            problems.append(f"{draft.client_msg_id}: stored at {copies}, acked at {message.seq}")
    return problems


def missing_on(service: MessageService, writer: Writer) -> list[str]:
    """What the writer was acknowledged that service does not show (empty: all there)."""
    seqs = sorted(writer.sent)
    problems = []
    for entry in service.pull(writer.conversation, VIEWER, seqs):
        if not isinstance(entry, MessageView) or entry.content != writer.sent[entry.seq]:
            problems.append(f"{writer.conversation} seq {entry.seq}: {entry}")
    for entry in service.pull(writer.conversation, TAGGER, sorted(writer.tagged)):
        if not (isinstance(entry, Tombstone) and entry.reason is TombstoneReason.DELETED):
            problems.append(f"{writer.conversation} seq {entry.seq} not deleted for {TAGGER}")
    return problems


def run_writers(
    writers: list[Writer], opener: Callable[[int], MessageService]
) -> tuple[threading.Event, list[threading.Thread]]:
    """Start one thread per writer (writer i opens its service with opener(i))."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=writer.run, args=(lambda i=i: opener(i), stop), daemon=True)
        for i, writer in enumerate(writers)
    ]
    for thread in threads:
        thread.start()
    return stop, threads


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll condition until it holds or timeout seconds passed; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@dataclass
class Fault:
    """Writers carried through a fault: when it struck and what they did around it."""

    struck_at: float  # time.monotonic() when the fault was injected
    before: list[int]  # each writer's acknowledged sends at that moment
    resumed: bool  # every writer had ``after`` more acknowledgements within the wait
    first_ack: float | None  # seconds from the fault to the first acknowledgement after it


def through_fault(
    writers: list[Writer],
    opener: Callable[[int], MessageService],
    strike: Callable[[], object],
    acks: tuple[int, int],
    wait_seconds: float,
) -> Fault:
    """Run writers until each has acks[0] acknowledgements, strike, then wait for acks[1] more.

    The writers are stopped and joined before this returns, whatever happened.
    """
    ahead, after = acks
    stop, threads = run_writers(writers, opener)
    try:
        assert wait_for(lambda: all(len(w.sent) >= ahead for w in writers), 60)
        struck_at = time.monotonic()
        strike()
        before = [len(w.sent) for w in writers]
        resumed = wait_for(
            lambda: all(len(w.sent) >= b + after for w, b in zip(writers, before, strict=True)),
            wait_seconds,
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    later = [t for w in writers for t in w.acks_at if t > struck_at]
    return Fault(struck_at, before, resumed, min(later) - struck_at if later else None)
