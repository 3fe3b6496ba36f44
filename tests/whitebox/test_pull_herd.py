"""A herd of pulls of one group reaches the store a few times, not once per member.

64 members pull the group's newest 20 seqs at once (threads, and tasks of ``imbucket.aio``):
the statements the store's engine receives are counted, and every member's answer is
compared with what it gets pulling alone (through the backend's own one-viewer read), with
members whose deletions, clear floors and (on spilling rows) spilled deleters differ.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from imbucket.app import MessageService
from imbucket.app.coalescing import CoalescedViews
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.testing.aio import unwrapped
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import ASYNC_API, SQL, backends

MEMBERS = [f"member-{n:02}" for n in range(64)]
MOST_STATEMENTS = 16
# The store's rows without a cache in front (a cached pull reads the cache, not the store).
UNCACHED_SQL = [row for row in backends(SQL) if "redis" not in str(row.values[0])]
APIS = {"threads": {}, "asyncio": {ASYNC_API: True}}


def group(service: MessageService) -> None:
    """250 messages; some members deleted some of the newest, one cleared, one deleted a lot."""
    service.ingest(CONV, messages(1, 250))
    for n, member in enumerate(MEMBERS[:12]):
        service.delete_for_me(CONV, [250 - n % 4, 238], member)
    service.clear_history(CONV, MEMBERS[20])
    service.ingest(CONV, messages(251, 252))


def herd(service: MessageService, pull: Callable[[str], Any]) -> tuple[dict[str, Any], int]:
    """Every member pulls at once; their answers and the statements the engine received.

    "At once" is made so whatever the machine's load: the first statement is held until
    every member has called its pull (bounded), so that a slow thread start does not turn
    the herd into a trickle of pulls that each find no read to join.
    """
    answers: dict[str, Any] = {}
    start = threading.Barrier(len(MEMBERS))
    arrived = threading.Semaphore(0)

    def member(viewer: str) -> None:
        start.wait()
        arrived.release()
        try:
            answers[viewer] = pull(viewer)
        except Exception as error:  # compared with the expected answers below
            answers[viewer] = error

    threads = [threading.Thread(target=member, args=(viewer,)) for viewer in MEMBERS]
    engine = service.store.engine  # type: ignore[attr-defined]
    with EngineStatements(engine) as trips, _first_statement_held(engine, arrived):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    return answers, trips.total


@contextmanager
def _first_statement_held(engine: Any, arrived: threading.Semaphore) -> Iterator[None]:
    """Hold the engine's first statement until every member has arrived, then a moment more."""
    held = threading.Event()

    def hold(*_: object) -> None:
        if held.is_set():
            return
        held.set()
        for _member in MEMBERS:
            arrived.acquire(timeout=10)
        time.sleep(0.2)  # the members' few lines from their call to joining the next read

    event.listen(engine, "before_cursor_execute", hold)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", hold)


@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
@pytest.mark.parametrize("backend_config", UNCACHED_SQL, indirect=True)
def test_a_herd_of_pull_latest_costs_at_most_16_statements(
    open_backend: Callable[..., MessageService], api: dict[str, Any]
) -> None:
    service = open_backend(**api)
    assert isinstance(unwrapped(service.views), CoalescedViews)
    group(service)
    expected = {viewer: service.pull_latest(CONV, viewer, 20) for viewer in MEMBERS}
    answers, statements = herd(service, lambda viewer: service.pull_latest(CONV, viewer, 20))
    assert answers == expected
    assert statements <= MOST_STATEMENTS, statements
    assert len(expected[MEMBERS[20]]) == 2  # the cleared member sees only what came after


@pytest.mark.parametrize("backend_config", UNCACHED_SQL, indirect=True)
def test_a_herd_of_pull_range_and_scattered_pulls_is_coalesced_too(
    open_backend: Callable[..., MessageService],
) -> None:
    service = open_backend()
    group(service)
    for pull in (
        lambda s, viewer: s.pull_range(CONV, viewer, 231, 252),
        lambda s, viewer: s.pull(CONV, viewer, [3, 238, 249, 250, 252]),
    ):
        expected = {viewer: pull(service, viewer) for viewer in MEMBERS}
        answers, statements = herd(service, lambda viewer, p=pull: p(service, viewer))
        assert answers == expected
        assert statements <= MOST_STATEMENTS, statements


@pytest.mark.parametrize("backend_config", UNCACHED_SQL, indirect=True)
def test_without_coalescing_each_member_of_the_herd_costs_a_statement(
    open_backend: Callable[..., MessageService], backend_config: dict[str, Any]
) -> None:
    # 64 pulls at once hold 64 connections: the pool's overflow is waited for, not refused.
    store = {**backend_config["store"], "pool_timeout_seconds": 30}
    alone = open_backend(store=store, service={"coalesce_pulls": False})
    assert not isinstance(unwrapped(alone.views), CoalescedViews)
    group(alone)
    _, statements = herd(alone, lambda viewer: alone.pull_latest(CONV, viewer, 20))
    assert statements == len(MEMBERS)
