r"""Concurrent callers as asyncio tasks (imbucket.aio) against threads (the sync API).

Per engine and layout, N callers share one service and run ``--ops`` calls between them:
pulls (``pull_latest`` of 20 on one of the preloaded conversations) and sends (one message
to a conversation of the caller's own). Each cell reports throughput and p99 latency. Not
part of ``make bench``; run it as::

    nice python -m imbucket.bench.aio_bench --url sqlite \\
        --url postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        --url mysql+pymysql://root@127.0.0.1:3306/test

Server URLs get a scratch namespace of their own (``bench.instrument.scratch``), dropped
after; ``sqlite`` means a temporary file. The machine's load over the run is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imbucket.app import MessageService, open_service
from imbucket.app.aio import AsyncMessageService
from imbucket.app.aio import open_service as open_async
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.bench.machine import LoadWatch
from imbucket.domain.errors import ImbucketError
from imbucket.domain.model import Draft, Message

CALLERS = (1, 4, 16, 64, 256)
LAYOUTS = ("sql-row", "sql-bucket")
OPERATIONS = ("pull", "send")
CONVERSATIONS = 32  # preloaded, PRELOAD messages each; pulls pick one by caller and call
PRELOAD = 100


@dataclass(frozen=True)
class Cell:
    """One measurement: engine, layout, operation, mode (tasks or threads), callers."""

    engine: str
    layout: str
    operation: str
    mode: str
    callers: int
    calls: int  # answered; the rest of the cell's calls were refused (ImbucketError)
    seconds: float
    p99_ms: float

    @property
    def throughput(self) -> float:
        """Calls per second."""
        return self.calls / self.seconds


def p99(latencies: Sequence[float]) -> float:
    """The 99th percentile of latencies (nearest rank), in milliseconds."""
    ordered = sorted(latencies)
    if not ordered:
        return float("nan")
    return 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _draft(tag: str) -> Draft:
    return Draft(send_id="alice", content="hello", client_msg_id=tag, recv_id="bob")


def _calls(operation: str, callers: int, ops: int) -> list[list[tuple[str, Draft | None]]]:
    """Per caller, its calls: (conversation, draft to send or None to pull)."""
    run = uuid.uuid4().hex[:8]
    plan: list[list[tuple[str, Draft | None]]] = []
    for caller in range(callers):
        mine = range(caller, ops, callers)
        if operation == "pull":
            plan.append([(f"si_pre_{n % CONVERSATIONS}", None) for n in mine])
        else:
            plan.append([(f"si_{run}_{caller}", _draft(f"{run}-{n}")) for n in mine])
    return plan


def _threads(service: MessageService, plan: list[list[tuple[str, Draft | None]]]) -> list[float]:
    latencies: list[float] = []
    barrier = threading.Barrier(len(plan))

    def caller(calls: list[tuple[str, Draft | None]]) -> None:
        barrier.wait()
        for conversation, draft in calls:
            began = time.perf_counter()
            try:
                if draft is None:
                    service.pull_latest(conversation, "bob", 20)
                else:
                    service.send(conversation, [draft])
            except ImbucketError:  # e.g. no free pooled connection in time: not a latency
                continue
            latencies.append(time.perf_counter() - began)

    workers = [threading.Thread(target=caller, args=(calls,)) for calls in plan]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return latencies


async def _tasks(
    service: AsyncMessageService, plan: list[list[tuple[str, Draft | None]]]
) -> list[float]:
    latencies: list[float] = []

    async def caller(calls: list[tuple[str, Draft | None]]) -> None:
        for conversation, draft in calls:
            began = time.perf_counter()
            try:
                if draft is None:
                    await service.pull_latest(conversation, "bob", 20)
                else:
                    await service.send(conversation, [draft])
            except ImbucketError:  # e.g. no free pooled connection in time: not a latency
                continue
            latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(caller(calls) for calls in plan))
    return latencies


def _timed(run: Callable[[], list[float]]) -> tuple[float, list[float]]:
    began = time.perf_counter()
    latencies = run()
    return time.perf_counter() - began, latencies


def _preload(service: MessageService) -> None:
    for n in range(CONVERSATIONS):
        drafts = [_draft(f"pre-{n}-{i}") for i in range(PRELOAD)]
        sent: list[Message] = service.send(f"si_pre_{n}", drafts)
        assert len(sent) == PRELOAD


def measure(engine: str, url: str, layout: str, callers: Sequence[int], ops: int) -> list[Cell]:
    """Every cell of one engine and layout, on the store at url (preloaded here)."""
    config = {"store": {"backend": layout, "url": url}}
    cells = []
    with open_service(config) as service:
        _preload(service)
        _threads(service, _calls("pull", 1, CONVERSATIONS))  # warm up, as tasks do
        for operation in OPERATIONS:
            for n in callers:
                plan = _calls(operation, n, max(ops, n))
                seconds, latencies = _timed(functools.partial(_threads, service, plan))
                cells.append(
                    Cell(
                        engine,
                        layout,
                        operation,
                        "threads",
                        n,
                        len(latencies),
                        seconds,
                        p99(latencies),
                    )
                )
    cells += asyncio.run(_measure_tasks(engine, config, layout, callers, ops))
    return cells


async def _measure_tasks(
    engine: str, config: dict[str, Any], layout: str, callers: Sequence[int], ops: int
) -> list[Cell]:
    cells = []
    async with open_async(config) as service:
        await _tasks(service, _calls("pull", 1, CONVERSATIONS))  # warm the pool, as threads had
        for operation in OPERATIONS:
            for n in callers:
                plan = _calls(operation, n, max(ops, n))
                began = time.perf_counter()
                latencies = await _tasks(service, plan)
                seconds = time.perf_counter() - began
                cells.append(
                    Cell(
                        engine,
                        layout,
                        operation,
                        "tasks",
                        n,
                        len(latencies),
                        seconds,
                        p99(latencies),
                    )
                )
    return cells


def table(cells: Sequence[Cell]) -> str:
    """A Markdown table of cells."""
    lines = [
        "| engine | layout | op | mode | N | calls/s | p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c.engine} | {c.layout} | {c.operation} | {c.mode} | {c.callers} | "
        f"{c.throughput:.0f} | {c.p99_ms:.1f} |"
        for c in cells
    ]
    return "\n".join(lines)


def verdict(cells: Sequence[Cell], engine: str, at: int = 64) -> list[str]:
    """Per layout and operation: tasks at N=at against threads at their best N."""
    found = []
    for layout in LAYOUTS:
        for operation in OPERATIONS:
            mine = [
                c for c in cells if (c.engine, c.layout, c.operation) == (engine, layout, operation)
            ]
            tasks = [c for c in mine if c.mode == "tasks" and c.callers == at]
            threads = [c for c in mine if c.mode == "threads"]
            if not tasks or not threads:
                continue
            best = max(threads, key=lambda c: c.throughput)
            best_task = max((c for c in mine if c.mode == "tasks"), key=lambda c: c.throughput)
            holds = "holds" if tasks[0].throughput >= best.throughput else "does not hold"
            found.append(
                f"{engine} {layout} {operation}: tasks N={at} {tasks[0].throughput:.0f}/s vs "
                f"threads best N={best.callers} {best.throughput:.0f}/s: {holds} (tasks at "
                f"their best, N={best_task.callers}: {best_task.throughput:.0f}/s)"
            )
    return found


def _engine(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0]


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python -m imbucket.bench.aio_bench --url URL ...``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", action="append", required=True, help="sqlite or a server URL")
    parser.add_argument("--layout", action="append", choices=LAYOUTS, help="default: both")
    parser.add_argument("--callers", default=",".join(map(str, CALLERS)), help="e.g. 1,4,16,64")
    parser.add_argument("--ops", type=int, default=512, help="calls per cell (at least N)")
    args = parser.parse_args(argv)
    callers = [int(n) for n in args.callers.split(",")]
    watch, cells = LoadWatch(), []
    for url in args.url:
        for layout in args.layout or LAYOUTS:
            cells += _measure_url(url, layout, callers, args.ops)
    print(table(cells))
    for engine in dict.fromkeys(c.engine for c in cells):
        print("\n".join(verdict(cells, engine)))
    print(f"machine load: {watch.finish()}")


def _measure_url(url: str, layout: str, callers: Sequence[int], ops: int) -> list[Cell]:
    if url == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "bench.db"
            return measure("sqlite", f"sqlite:///{path}", layout, callers, ops)
    with scratch_store(url, f"imb_aio_{uuid.uuid4().hex[:12]}") as scratch:
        return measure(_engine(url), scratch, layout, callers, ops)


if __name__ == "__main__":
    main()
