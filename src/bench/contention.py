"""Contention workloads: N concurrent writers (and readers) on one backend, bounded runs.

Three scenarios, each at N = 1, 4 and 16 workers:

- ``hot_group``: N writers send to one group (one bucket takes every write in turn);
- ``many_groups``: N writers send to groups drawn from many (writers rarely meet);
- ``readers``: N readers open the hot group (``pull_latest(20)``) while 4 writers send to it.

Workers are threads, and, for stores another process can open (not memory), also processes,
since the GIL serialises threads and can hide contention in the engine. Every run is bounded
by a count (the operations planned) and a time (a deadline after which workers stop early).
Conflicts and retries are counted at the stores (``imbucket.adapters.contention``), never by timing.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from imbucket.adapters import contention
from imbucket.app.service import MessageService
from imbucket.bench import results
from imbucket.bench.results import Plan
from imbucket.domain.model import Draft, SessionType

READER_WRITERS = 4  # writers sending while the readers of the readers scenario pull
GROUPS = 64  # groups of the many_groups scenario
_MAX_US = 600_000_000
_JOIN_S = 30.0  # a worker process that has not reported by then is stopped


@dataclass(frozen=True, slots=True)
class Scenario:
    """One contention scenario and what the report says about it."""

    name: str
    title: str
    about: str


SCENARIOS = (
    Scenario("hot_group", "one hot group", "N writers send to the same group"),
    Scenario("many_groups", f"{GROUPS} groups", f"N writers send to groups drawn from {GROUPS}"),
    Scenario(
        "readers",
        "readers while writing",
        f"N readers pull_latest(20) of the hot group while {READER_WRITERS} writers send to it",
    ),
)


_ALL = tuple(s.name for s in SCENARIOS)
PLANS = {
    "tiny": Plan(48, 0.5),
    "small": Plan(160, 0.75),
    "medium": Plan(800, 5.0, processes=_ALL),
    "large": Plan(1_600, 10.0, processes=_ALL),
}


@dataclass
class Tally:
    """What one worker did: latencies (µs), errors, and the conflicts counted in its process."""

    latencies: list[int] = field(default_factory=list)
    writes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    conflicts: dict[str, int] = field(default_factory=dict)

    def merge(self, other: Tally) -> None:
        """Add another worker's tally to this one."""
        self.latencies += other.latencies
        self.writes += other.writes
        self.errors.update(other.errors)
        for kind, n in other.conflicts.items():
            self.conflicts[kind] = self.conflicts.get(kind, 0) + n


@dataclass(frozen=True, slots=True)
class Job:
    """One worker's share of a run (picklable, for worker processes)."""

    role: str  # "send" or "read"
    worker: int
    conversations: tuple[str, ...]
    count: int
    seconds: float
    run_id: str


def _draft(job: Job, n: int, conversation: str) -> Draft:
    sender = f"w{job.worker:02d}"
    return Draft(
        send_id=sender,
        content=f"contention message {n} from {sender}",
        client_msg_id=f"{job.run_id}-{job.worker}-{n}",
        session_type=SessionType.GROUP,
        group_id=conversation[3:],
    )


def work(
    service: MessageService, job: Job, start: Callable[[], object], stopped: Callable[[], bool]
) -> Tally:
    """Run one worker's operations after start() returns, until count, deadline or stopped().

    Every worker runs its first operation whatever stopped() says: on two cores the readers
    of the readers scenario can finish before a background writer is scheduled at all, and a
    run with no write would not measure reading while writing.
    """
    tally = Tally()
    start()
    deadline = time.monotonic() + job.seconds
    for n in range(job.count):
        if n and (stopped() or time.monotonic() > deadline):
            break
        conversation = job.conversations[(n * 7 + job.worker) % len(job.conversations)]
        clock = time.perf_counter()
        try:
            if job.role == "send":
                service.send(conversation, [_draft(job, n, conversation)])
            else:
                service.pull_latest(conversation, f"w{job.worker:02d}", 20)
        except Exception as error:  # an operation that fails is a result, not a crash
            tally.errors[f"{type(error).__name__}: {error}"[:200]] += 1
        tally.latencies.append(max(1, round((time.perf_counter() - clock) * 1_000_000)))
        tally.writes += job.role == "send"
    return tally


def jobs(
    scenario: str, workers: int, plan: Plan, run_id: str, hot: str = ""
) -> tuple[list[Job], list[Job]]:
    """The measured jobs and the background writers (readers scenario) of one run.

    hot is the group the readers scenario reads (primed with messages); by default, and in
    the other scenarios, a new group of this run.
    """
    if scenario != "readers" or not hot:
        hot = f"sg_{run_id}_hot"
    share = max(1, plan.ops // workers)
    if scenario == "hot_group":
        return [Job("send", w, (hot,), share, plan.seconds, run_id) for w in range(workers)], []
    if scenario == "many_groups":
        groups = tuple(f"sg_{run_id}_g{k:02d}" for k in range(GROUPS))
        return [
            Job("send", w, groups[w % GROUPS :] + groups[: w % GROUPS], share, plan.seconds, run_id)
            for w in range(workers)
        ], []
    readers = [Job("read", w, (hot,), share, plan.seconds, run_id) for w in range(workers)]
    writers = [
        Job("send", 100 + w, (hot,), plan.ops, plan.seconds, run_id) for w in range(READER_WRITERS)
    ]
    return readers, writers


def summarise(
    measured: Tally,
    background: Tally,
    seconds: float,
    *,
    planned: int,
    scenario: str,
    mode: str,
    workers: int,
) -> results.ContentionRun:
    """One run: throughput, latency, conflicts per write, errors."""
    histogram = HdrHistogram(1, _MAX_US, 3)
    for value in measured.latencies:
        histogram.record_value(min(value, _MAX_US))
    ops = len(measured.latencies)
    writes = measured.writes + background.writes
    conflicts = {
        k: measured.conflicts.get(k, 0) + background.conflicts.get(k, 0) for k in contention.KINDS
    }
    errors = measured.errors + background.errors
    return results.ContentionRun(
        scenario=scenario,
        mode=mode,
        workers=workers,
        ops=ops,
        planned=planned,
        writes=writes,
        seconds=round(seconds, 4),
        ops_per_s=round(ops / seconds, 1) if seconds > 0 else 0.0,
        latency_us=results.Latency(
            p50=histogram.get_value_at_percentile(50) if ops else 0,
            p99=histogram.get_value_at_percentile(99) if ops else 0,
            max=histogram.get_max_value() if ops else 0,
        ),
        conflicts=conflicts,
        conflicts_per_write=round(sum(conflicts.values()) / writes, 4) if writes else 0.0,
        errors=sum(errors.values()),
        error_samples=dict(errors.most_common(3)),
    )


def run_threads(
    service: MessageService, measured: list[Job], background: list[Job]
) -> tuple[Tally, Tally, float]:
    """Run the jobs as threads of this process: (measured, background, wall seconds)."""
    everyone = measured + background
    barrier = threading.Barrier(len(everyone) + 1)
    stop = threading.Event()
    results: list[Tally | None] = [None] * len(everyone)

    def target(k: int) -> None:
        results[k] = work(service, everyone[k], lambda: barrier.wait(_JOIN_S), stop.is_set)

    threads = [
        threading.Thread(target=target, args=(k,), daemon=True) for k in range(len(everyone))
    ]
    for thread in threads:
        thread.start()
    before = contention.snapshot()
    barrier.wait(_JOIN_S)
    clock = time.perf_counter()
    for thread in threads[: len(measured)]:
        thread.join(_JOIN_S)
    seconds = time.perf_counter() - clock
    stop.set()  # the background writers stop once the measured workers are done
    for thread in threads[len(measured) :]:
        thread.join(_JOIN_S)
    conflicts = contention.since(before)
    mine, theirs = Tally(conflicts=conflicts), Tally()
    for k, tally in enumerate(results):
        if tally is not None:
            (mine if k < len(measured) else theirs).merge(tally)
    return mine, theirs, seconds


# Imported once by the fork server, so that each worker opens its service in milliseconds
# instead of importing the app, the SQL adapters and SQLAlchemy's dialects itself.
PRELOAD = (
    "imbucket",
    "imbucket.bench.contention",
    "imbucket.app.container",
    "imbucket.adapters.sql",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.mysql",
)


def _child(config: dict[str, Any], job: Job, barrier: Any, stop: Any, out: Any) -> None:
    """A worker process: open its own service, wait for the others, work, report."""
    from imbucket.app import open_service

    tally = Tally()
    try:
        with open_service(config) as service:
            service.max_seq(job.conversations[0])  # connect before the clock starts
            before = contention.snapshot()
            tally = work(service, job, lambda: barrier.wait(_JOIN_S), stop.is_set)
            tally.conflicts = contention.since(before)
    except Exception as error:  # reported by the parent as an error of this worker
        barrier.abort()  # nobody waits for a worker that cannot start
        tally.errors[f"{type(error).__name__}: {error}"[:200]] += 1
    out.put((job.worker, tally))


def run_processes(
    config: dict[str, Any], measured: list[Job], background: list[Job]
) -> tuple[Tally, Tally, float]:
    """Run the jobs as processes, each with its own connections: (measured, background, s)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    everyone = measured + background
    barrier = context.Barrier(len(everyone) + 1)
    stop = context.Event()
    out: Any = context.Queue()
    processes = [
        context.Process(target=_child, args=(config, job, barrier, stop, out), daemon=True)
        for job in everyone
    ]
    for process in processes:
        process.start()
    mine, theirs = Tally(), Tally()
    ours = {job.worker for job in measured}
    pending, seconds, clock = set(ours), 0.0, time.perf_counter()
    try:
        barrier.wait(_JOIN_S * 2)  # the workers open their services first
        clock = time.perf_counter()
    except threading.BrokenBarrierError:
        mine.errors["a worker process could not start"] += 1
    try:
        for _ in everyone:
            worker, tally = out.get(timeout=_JOIN_S)
            (mine if worker in ours else theirs).merge(tally)
            pending.discard(worker)
            if not pending and not seconds:
                seconds = time.perf_counter() - clock
                stop.set()  # the background writers stop once the measured ones are done
    except queue.Empty:
        mine.errors[f"worker processes silent for {_JOIN_S:.0f} s"] += 1
    finally:
        stop.set()
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
    return mine, theirs, seconds or time.perf_counter() - clock


def prime(service: MessageService, run_id: str) -> str:
    """A group with 20 messages for the readers scenario to read (untimed); its id."""
    hot = f"sg_{run_id}_read"
    work(service, Job("send", 999, (hot,), 20, 60.0, run_id), lambda: None, lambda: False)
    return hot


def measure(
    service: MessageService,
    config: dict[str, Any] | None,
    plan: Plan,
    run_id: str,
    progress: Callable[[str], None] = lambda title: None,
) -> list[results.ContentionRun]:
    """Every scenario at every N, as threads and (when config is given) as processes.

    config is the open_service config another process can open the same store with; None
    for stores that live in this process. One worker as a process measures what one thread
    does, so processes run only for N > 1.
    """
    runs: list[results.ContentionRun] = []
    hot = prime(service, run_id)
    for scenario in SCENARIOS:
        shared = config is not None and scenario.name in plan.processes
        for mode in ("threads", "processes") if shared else ("threads",):
            for workers in plan.workers:
                if mode == "processes" and workers == 1:
                    continue
                tag = f"{run_id}{scenario.name[0]}{mode[0]}{workers}"
                progress(f"{scenario.title} · {workers} {mode}")
                measured, background = jobs(scenario.name, workers, plan, tag, hot)
                if mode == "threads":
                    tallies = run_threads(service, measured, background)
                else:
                    assert config is not None
                    tallies = run_processes(config, measured, background)
                planned = sum(job.count for job in measured)
                runs.append(
                    summarise(
                        *tallies,
                        planned=planned,
                        scenario=scenario.name,
                        mode=mode,
                        workers=workers,
                    )
                )
    return runs
