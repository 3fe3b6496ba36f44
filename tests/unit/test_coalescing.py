"""CoalescedViews: which pulls share a read, and what each one is promised.

On a fake store whose reads can be held open: a pull that arrives while a read runs waits
for the next read, never takes the running one's answer (it may predate a write the pull
saw acknowledged); a waiting pull gives up at its deadline; a failed read fails its pulls;
a cancelled leader's pulls read again. Threads and asyncio tasks (greenlets) both.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.util import greenlet_spawn

from imbucket.adapters.asyncio_bridge import wait_for
from imbucket.app.coalescing import CoalescedViews, coalesced
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Pick, Watermarks
from imbucket.ports.view_reads import View
from tests.waits import returned

CONV = "sg_herd"
LATEST = Pick(latest=20)


class Store:
    """Pull reads answering the version of the data they read at (max_seq = version).

    The first ``held`` reads wait for ``release`` (a threading.Event, or an asyncio.Event
    waited for on the loop) after recording that they started.
    """

    def __init__(self, held: int = 1, on_loop: bool = False) -> None:
        self.version = 0
        self.reads: list[tuple[str, ...]] = []
        self.held = held
        self.started = threading.Event()
        self.release: Any = asyncio.Event() if on_loop else threading.Event()
        self.fail = ""  # each read then fails with a StoreUnavailable of its own

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        return self.view_many(conversation_id, [viewer_id], pick, alone=True)[viewer_id]

    def view_many(
        self, conversation_id: str, viewer_ids: Sequence[str], pick: Pick, alone: bool = False
    ) -> dict[str, View]:
        self.reads.append(("alone" if alone else "shared", *viewer_ids))
        version = self.version
        if len(self.reads) <= self.held:
            self.started.set()
            if isinstance(self.release, asyncio.Event):
                wait_for(self.release.wait())
            else:
                self.release.wait(30)
        if self.fail:
            raise StoreUnavailable(self.fail)
        return {viewer: (Watermarks(version, 0, 0), {}) for viewer in viewer_ids}


def waiting(views: CoalescedViews, count: int) -> None:
    """Wait until count pulls wait behind the running read (they joined the next one)."""
    for _ in range(3000):
        with views._lock:
            line = views._lines.get((CONV, LATEST))
            if line is not None and sum(len(b.members) for b in line.queued) >= count:
                return
        time.sleep(0.01)
    raise AssertionError(f"{count} pulls never joined")


def pulling(views: CoalescedViews, viewer: str, answers: dict[str, Any]) -> threading.Thread:
    def pull() -> None:
        try:
            answers[viewer] = views.view(CONV, viewer, LATEST)[0].max_seq
        except BaseException as error:  # checked by the test
            answers[viewer] = error

    thread = threading.Thread(target=pull)
    thread.start()
    return thread


def test_pulls_arriving_during_a_read_share_the_next_one_and_see_the_write_before_them() -> None:
    store = Store()
    views = CoalescedViews(store, store, wait_seconds=30)
    answers: dict[str, Any] = {}
    first = pulling(views, "alice", answers)
    assert store.started.wait(30)
    store.version = 1  # a write acknowledged while alice's read runs, before the others pull
    others = [pulling(views, viewer, answers) for viewer in ("bob", "carol", "bob")]
    waiting(views, 3)
    store.release.set()
    for thread in (first, *others):
        thread.join(30)
    assert answers == {"alice": 0, "bob": 1, "carol": 1}
    assert store.reads == [("alone", "alice"), ("shared", "bob", "carol")]


def test_a_pull_alone_reads_alone_at_once() -> None:
    store = Store(held=0)
    views = CoalescedViews(store, store, wait_seconds=30)
    assert views.view(CONV, "alice", LATEST)[0].max_seq == 0
    assert views.view(CONV, "bob", Pick(seqs=(1, 2)))[0].max_seq == 0
    assert store.reads == [("alone", "alice"), ("alone", "bob")]
    assert not views._lines  # nothing left behind


def test_a_joiner_gives_up_at_its_deadline_and_the_read_goes_on_without_it() -> None:
    store = Store()
    views = CoalescedViews(store, store, wait_seconds=0.2)
    answers: dict[str, Any] = {}
    first = pulling(views, "alice", answers)
    assert store.started.wait(30)
    late = returned(lambda: views.view(CONV, "bob", LATEST))
    assert isinstance(late, StoreUnavailable) and "gave up" in str(late)
    store.release.set()
    first.join(30)
    assert answers == {"alice": 0}
    assert store.reads == [("alone", "alice")]  # bob's batch had nobody left to read for
    assert not views._lines


def test_a_failed_shared_read_fails_each_of_its_pulls_with_an_error_of_its_own() -> None:
    store = Store()
    views = CoalescedViews(store, store, wait_seconds=30)
    answers: dict[str, Any] = {}
    first = pulling(views, "alice", answers)
    assert store.started.wait(30)
    others = [pulling(views, viewer, answers) for viewer in ("bob", "carol")]
    waiting(views, 2)
    store.fail = "the server went away"
    store.release.set()
    for thread in (first, *others):
        thread.join(30)
    errors = [answers[viewer] for viewer in ("alice", "bob", "carol")]
    assert all(isinstance(e, StoreUnavailable) and "went away" in str(e) for e in errors)
    assert errors[1] is not errors[2]  # the joiner raises its own, chained to the leader's
    assert errors[2].__cause__ is errors[1] or errors[1].__cause__ is errors[2]


def test_coalescing_is_wired_only_when_enabled_and_the_backend_has_shared_reads() -> None:
    store = Store()
    assert isinstance(coalesced(store, store, True, 30), CoalescedViews)
    assert coalesced(store, store, False, 30) is store
    assert coalesced(store, None, True, 30) is store
    assert coalesced(None, store, True, 30) is None


def test_asyncio_pulls_wait_on_the_loop_and_share_the_next_read() -> None:
    async def main() -> tuple[dict[str, int], list[tuple[str, ...]]]:
        store = Store(on_loop=True)
        views = CoalescedViews(store, store, wait_seconds=30)

        async def pull(viewer: str) -> int:
            view = await greenlet_spawn(views.view, CONV, viewer, LATEST)
            return view[0].max_seq

        first = asyncio.create_task(pull("alice"))
        while not store.started.is_set():
            await asyncio.sleep(0.01)
        store.version = 1
        others = [asyncio.create_task(pull(viewer)) for viewer in ("bob", "carol")]
        await asyncio.sleep(0.05)  # both are waiting on the loop, which keeps running
        store.release.set()
        found = await asyncio.gather(first, *others)
        answers = dict(zip(("alice", "bob", "carol"), found, strict=True))
        return answers, store.reads

    answers, reads = asyncio.run(main())
    assert answers == {"alice": 0, "bob": 1, "carol": 1}
    assert reads == [("alone", "alice"), ("shared", "bob", "carol")]


def test_asyncio_a_cancelled_leaders_pulls_read_again() -> None:
    async def main() -> tuple[Any, list[tuple[str, ...]]]:
        store = Store(held=2, on_loop=True)
        views = CoalescedViews(store, store, wait_seconds=30)

        async def pull(viewer: str) -> int:
            view = await greenlet_spawn(views.view, CONV, viewer, LATEST)
            return view[0].max_seq

        first = asyncio.create_task(pull("alice"))
        await asyncio.sleep(0.05)
        bob, carol = asyncio.create_task(pull("bob")), asyncio.create_task(pull("carol"))
        await asyncio.sleep(0.05)
        first.cancel()  # alice's read is cancelled: bob and carol's read starts, held too
        await asyncio.sleep(0.05)
        bob.cancel()  # the leader of the shared read: carol reads again, alone
        store.release.set()
        outcomes = await asyncio.gather(first, bob, carol, return_exceptions=True)
        return outcomes, store.reads

    outcomes, reads = asyncio.run(main())
    assert isinstance(outcomes[0], asyncio.CancelledError)
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert outcomes[2] == 0
    assert reads == [("alone", "alice"), ("shared", "bob", "carol"), ("alone", "carol")]


def test_a_herd_bigger_than_one_read_is_served_by_consecutive_reads() -> None:
    store = Store()
    views = CoalescedViews(store, store, wait_seconds=30, most_viewers=2)
    answers: dict[str, Any] = {}
    first = pulling(views, "alice", answers)
    assert store.started.wait(30)
    others = [pulling(views, viewer, answers) for viewer in ("bob", "carol", "dave")]
    waiting(views, 3)
    store.release.set()
    for thread in (first, *others):
        thread.join(30)
    assert set(answers) == {"alice", "bob", "carol", "dave"}
    assert [len(read) - 1 for read in store.reads] == [1, 2, 1]
