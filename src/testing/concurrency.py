"""Start work on several threads, or processes, at the same instant."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from imbucket.app import open_service
from imbucket.app.aio import open_service as open_async
from imbucket.domain.model import Draft, Message
from imbucket.testing.rows import ASYNC_API

T = TypeVar("T")
WRITERS = 8


def run_together(count: int, work: Callable[[int], T]) -> list[T]:
    """Run work(0..count-1) on count threads released together by a barrier."""
    barrier = threading.Barrier(count)

    def start(index: int) -> T:
        barrier.wait()
        return work(index)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(start, range(count)))


def send_from_processes(
    count: int, config: Mapping[str, Any], conversation_id: str, drafts: Sequence[Draft]
) -> list[list[tuple[int, str]]]:
    """Send drafts from count processes released together; each one's (seq, server_msg_id)s.

    Each process opens its own service on config (which must name a store other processes
    can reach: a server, a SQLite file). A process that fails raises its error here.
    """
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    results = context.Queue()
    args = (barrier, results, dict(config), conversation_id, list(drafts))
    workers = [context.Process(target=_send_once, args=args) for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        answers = [results.get(timeout=120) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30)
    failures = [answer for answer in answers if isinstance(answer, str)]
    if failures:
        raise AssertionError(f"a sending process failed: {failures[0]}")
    return answers


def _send_once(
    barrier: Any, results: Any, config: dict[str, Any], conversation_id: str, drafts: list[Draft]
) -> None:
    try:
        if config.pop(ASYNC_API, False):
            sent = asyncio.run(_send_async(barrier, config, conversation_id, drafts))
        else:
            with open_service(config) as service:
                barrier.wait()
                sent = service.send(conversation_id, drafts)
        results.put([(message.seq, message.server_msg_id) for message in sent])
    except BaseException as error:  # reported to the parent, which fails the test
        results.put(f"{type(error).__name__}: {error}")


async def _send_async(
    barrier: Any, config: dict[str, Any], conversation_id: str, drafts: list[Draft]
) -> list[Message]:
    """A row on imbucket.aio: the process sends through the asyncio API."""
    async with open_async(config) as service:
        barrier.wait()  # this process's only task: blocking its loop holds nothing up
        return await service.send(conversation_id, drafts)
