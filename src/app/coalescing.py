"""Coalesced pulls: concurrent pulls of one conversation share one store read.

When a message lands in a big group, every online member pulls it at once. ``CoalescedViews``
lets the first of them read alone, and gathers those that arrive while that read runs into
the next read, which serves them all (``SharedViewReads.view_many``): a herd of N pulls costs
a few store reads instead of N. The batching is the group commit of a database log: no pull
waits for company, only for the read in front of it.

What a pull is promised is what it would get alone (docs/sql.md, "Coalesced pulls"):

- it joins only a read that has not started yet, so the read that answers it starts after
  the pull did and sees every write acknowledged before that, from any process;
- it waits no longer than its deadline (``wait_seconds`` from its start): past it, it leaves
  and raises ``StoreUnavailable``; the read goes on for the others;
- its answer is its own: its watermarks and its own deletions, cut from the shared read;
- a failed read fails the pulls that joined it with the same error; a read whose leader was
  cancelled (an asyncio task) is started again by another of its pulls.

Threads wait on events, and pulls of ``imbucket.aio`` (greenlets on an event loop) on the
loop, so that a waiting pull never blocks the loop that runs the read it waits for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from imbucket.adapters.asyncio_bridge import in_greenlet, wait_for
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Pick
from imbucket.ports.shared_view_reads import SharedViewReads
from imbucket.ports.view_reads import View, ViewReads

# The most viewers one shared read serves: it binds each viewer's id, so its statement grows
# with them; a bigger herd is served by consecutive reads.
MOST_VIEWERS = 256

Key = tuple[str, Pick]


class _ThreadSignal:
    """A one-shot wake-up for a pull waiting in a thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def wait(self, seconds: float) -> bool:
        return self._event.wait(seconds)


class _LoopSignal:
    """A one-shot wake-up for a pull waiting in a greenlet: it waits on the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[None] = self._loop.create_future()

    def set(self) -> None:
        self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    def wait(self, seconds: float) -> bool:
        try:
            wait_for(asyncio.wait_for(asyncio.shield(self._future), seconds))
        except TimeoutError:
            return self._future.done()
        return True


Signal = _ThreadSignal | _LoopSignal


@dataclass(eq=False)
class _Member:
    """One pull waiting in a batch: its viewer, how to wake it, and what it gets."""

    viewer: str
    signal: Signal | None = None  # given when it joins a batch: a pull alone never waits
    batch: _Batch | None = None
    answer: View | None = None
    error: BaseException | None = None
    done: bool = False
    leads: bool = False
    gone: bool = False


@dataclass(eq=False)
class _Batch:
    """The pulls one read answers; its first live member runs it."""

    members: list[_Member] = field(default_factory=list)


@dataclass(eq=False)
class _Line:
    """One (conversation, pick): the read running for it, and the batches waiting behind."""

    running: _Batch | None = None
    queued: deque[_Batch] = field(default_factory=deque)


class CoalescedViews:
    """``ViewReads`` that serves concurrent pulls of one conversation with one shared read.

    Pulls with the same conversation and pick (``pull_latest(20)`` by every member) are
    coalesced; a pull that finds no read running for its key reads alone, through views, at
    once. views: the backend's own pull reads; shared: its ``view_many``; wait_seconds: the
    longest a pull waits for the read it joined (its deadline, from its start).
    """

    def __init__(
        self,
        views: ViewReads,
        shared: SharedViewReads,
        wait_seconds: float,
        *,
        most_viewers: int = MOST_VIEWERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.views = views
        self.shared = shared
        self.wait_seconds = wait_seconds
        self.most_viewers = most_viewers
        self._clock = clock
        self._lock = threading.Lock()
        self._lines: dict[Key, _Line] = {}

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """The viewer's answer, read alone or in the next read of its conversation's herd."""
        deadline = self._clock() + self.wait_seconds
        key = (conversation_id, pick)
        member = _Member(viewer_id)
        with self._lock:
            line = self._lines.setdefault(key, _Line())
            if line.running is None:
                line.running = member.batch = _Batch([member])
                member.leads = True
            else:
                self._join(line, member)
        if not member.leads and self._waited(member, deadline):
            return self._outcome(member)
        return self._lead(key, member)

    def _join(self, line: _Line, member: _Member) -> None:
        """Put member in the last waiting batch of line, or a new one when that is full."""
        batch = line.queued[-1] if line.queued else None
        if batch is None or len(batch.members) >= self.most_viewers:
            batch = _Batch()
            line.queued.append(batch)
        batch.members.append(member)
        member.batch = batch
        member.signal = _LoopSignal() if in_greenlet() else _ThreadSignal()

    def _waited(self, member: _Member, deadline: float) -> bool:
        """Wait until member's read has answered (True) or member is to run it (False).

        Raises StoreUnavailable at the deadline, and whatever interrupts the wait (an
        asyncio cancellation): the member leaves its batch either way.
        """
        try:
            while True:
                remaining = deadline - self._clock()
                if remaining > 0 and member.signal is not None:
                    member.signal.wait(remaining)
                with self._lock:
                    if member.done or member.leads:
                        return member.done
                    if self._clock() >= deadline:
                        member.gone = True
                        raise StoreUnavailable(
                            f"a pull waited {self.wait_seconds:g} s for the shared read it "
                            "joined, and gave up"
                        )
        except BaseException:
            self._leave(member)
            raise

    def _leave(self, member: _Member) -> None:
        """A waiting member gives up; if it had just been made leader, another one leads."""
        with self._lock:
            member.gone = True
            if not member.leads or member.done or member.batch is None:
                return
            member.leads = False
            heir = next((m for m in member.batch.members if not m.gone), None)
            if heir is not None:
                heir.leads = True
        if heir is not None:
            _wake(heir)
        else:
            self._finish_line_of(member.batch)

    def _finish_line_of(self, batch: _Batch) -> None:
        """A running batch left with nobody to run it: the line moves on to the next."""
        with self._lock:
            for key, line in self._lines.items():
                if line.running is batch:
                    woken = self._advance(key, line)
                    break
            else:
                return
        if woken is not None:
            _wake(woken)

    def _lead(self, key: Key, member: _Member) -> View:
        """Run member's batch's read, hand every member its answer, start the next batch."""
        batch = member.batch
        assert batch is not None
        conversation_id, pick = key
        viewers = list(dict.fromkeys(m.viewer for m in batch.members if not m.gone))
        if member.viewer not in viewers:
            viewers.insert(0, member.viewer)
        answers: dict[str, View] = {}
        failure: BaseException | None = None
        try:
            if len(viewers) == 1:
                answers = {viewers[0]: self.views.view(conversation_id, viewers[0], pick)}
            else:
                answers = self.shared.view_many(conversation_id, viewers, pick)
        except BaseException as error:  # handed to the members, raised below for this one
            failure = error
        woken = self._settle(key, batch, member, answers, failure)
        for other in woken:
            _wake(other)
        if failure is not None:
            raise failure
        return self._outcome(member)

    def _settle(
        self,
        key: Key,
        batch: _Batch,
        leader: _Member,
        answers: dict[str, View],
        failure: BaseException | None,
    ) -> list[_Member]:
        """Record each member's outcome and advance the line; the members to wake."""
        interrupted = failure is not None and not isinstance(failure, Exception)
        with self._lock:
            line = self._lines[key]
            others = [m for m in batch.members if m is not leader and not m.gone]
            leader.done = True
            # A settled member lets go of its batch, which lists it: without the reference
            # cycle, a pull's bookkeeping is freed at once instead of by the cyclic collector.
            leader.batch = None
            if interrupted:  # the read was cancelled, not failed: the others read again
                if others:
                    again = _Batch(others)
                    for other in others:
                        other.batch = again
                    line.queued.appendleft(again)
                others = []
            for other in others:
                other.answer, other.error = answers.get(other.viewer), failure
                other.done = True
                other.batch = None
            leader.answer = answers.get(leader.viewer)
            woken = self._advance(key, line)
        return others if woken is None else [*others, woken]

    def _advance(self, key: Key, line: _Line) -> _Member | None:
        """The next waiting batch starts; its first live member leads it (returned)."""
        line.running = None
        while line.queued:
            batch = line.queued.popleft()
            batch.members = [m for m in batch.members if not m.gone]
            if batch.members:
                line.running = batch
                batch.members[0].leads = True
                return batch.members[0]
        del self._lines[key]
        return None

    def _outcome(self, member: _Member) -> View:
        """A member's answer, or its read's error raised anew for it."""
        if member.error is not None:
            raise _copy(member.error) from member.error
        if member.answer is None:
            raise StoreUnavailable("the shared read returned no answer for this viewer")
        return member.answer


def _wake(member: _Member) -> None:
    """Wake a waiting member (every member but a batch's first pull alone has a signal)."""
    if member.signal is not None:
        member.signal.set()


def _copy(error: BaseException) -> BaseException:
    """An error of the same class and message, for a pull that joined the failed read.

    Each pull raises its own instance, so that their tracebacks and notes stay apart.
    """
    try:
        return type(error)(*error.args)
    except Exception:
        return StoreUnavailable(str(error))


def coalesced(
    views: ViewReads | None,
    shared: SharedViewReads | None,
    enabled: bool,
    wait_seconds: float,
) -> ViewReads | None:
    """The pull reads the service gets: views, coalesced when enabled and possible.

    views go behind ``CoalescedViews`` when the backend has shared reads; else as they are.
    """
    if not enabled or views is None or shared is None:
        return views
    return CoalescedViews(views, shared, wait_seconds)
