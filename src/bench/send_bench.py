"""The ``send`` workload: ``MessageService.send`` of one new draft against its raw-driver arm.

Each run sends fresh drafts from N caller threads, either to many conversations (each call
to a conversation of its own) or to one hot group (every call to the same one), through the
service and through ``RawSend`` (the fewest hand-written statements), in alternating rounds
on the same server after an unmeasured call per caller of each arm, and reports calls per
second and the p99 latency of each arm::

    python -m imbucket.bench.send_bench --url postgresql+psycopg://... --layout sql-row

Numbers go to the caller's report only; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from imbucket.app import open_service
from imbucket.app.service import MessageService, now_ms
from imbucket.bench.instrument.raw_send import RawSend
from imbucket.domain.model import Draft, SessionType

SCENARIOS = ("many", "hot")
ROUNDS = 3  # alternating service/raw rounds per cell, so drift in the machine hits both
# Calls per caller each arm makes, unmeasured, before a cell's rounds: the first round would
# otherwise open the pool's connections, and the arm measured first would pay for both.
WARM_UP = 1


@dataclass(frozen=True, slots=True)
class Cell:
    """Calls per second and p99 (ms) of one arm at one scenario and caller count."""

    arm: str
    scenario: str
    callers: int
    calls_per_s: float
    p99_ms: float


def drafts(prefix: str) -> Callable[[int], Draft]:
    """A fresh draft per number, never sent before (a run-unique client_msg_id)."""

    def make(n: int) -> Draft:
        return Draft(
            send_id="alice",
            content=f"message {n}",
            client_msg_id=f"{prefix}-{n}",
            session_type=SessionType.GROUP,
            group_id="g1",
        )

    return make


def run_arm(
    send: Callable[[str, Draft], object], scenario: str, callers: int, calls: int
) -> tuple[float, list[float]]:
    """Send `calls` drafts from `callers` threads; wall seconds and each call's latency (s)."""
    run = uuid.uuid4().hex[:8]
    make = drafts(run)
    latencies: list[list[float]] = [[] for _ in range(callers)]
    barrier = threading.Barrier(callers + 1)
    failed: list[BaseException] = []

    def caller(k: int) -> None:
        barrier.wait()
        try:
            for i in range(k, calls, callers):
                conversation = f"sg_{run}_hot" if scenario == "hot" else f"sg_{run}_{i}"
                started = time.perf_counter()
                send(conversation, make(i))
                latencies[k].append(time.perf_counter() - started)
        except BaseException as error:
            failed.append(error)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]
    return time.perf_counter() - started, [t for each in latencies for t in each]


def measure(
    service: MessageService, raw: RawSend, scenario: str, callers: int, calls: int
) -> list[Cell]:
    """Both arms at one scenario and caller count, ROUNDS alternating rounds each."""
    arms: dict[str, Callable[[str, Draft], object]] = {
        "service": lambda conv, draft: service.send(conv, [draft]),
        "raw": lambda conv, draft: raw.send(conv, draft, now_ms()),
    }
    totals: dict[str, tuple[float, list[float]]] = {name: (0.0, []) for name in arms}
    for send in arms.values():  # unmeasured: the pool's connections open for both arms
        run_arm(send, scenario, callers, WARM_UP * callers)
    for _ in range(ROUNDS):
        for name, send in arms.items():
            seconds, latencies = run_arm(send, scenario, callers, calls)
            spent, seen = totals[name]
            totals[name] = (spent + seconds, seen + latencies)
    cells = []
    for name, (seconds, latencies) in totals.items():
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        cells.append(Cell(name, scenario, callers, len(latencies) / seconds, p99 * 1000))
    return cells


def main(argv: list[str] | None = None) -> None:
    """Print one line per cell and the raw/service ratio of calls per second."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--layout", default="sql-row", choices=["sql-row", "sql-bucket"])
    parser.add_argument("--callers", default="1,8")
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args(argv)
    service = open_service({"store": {"backend": args.layout, "url": args.url}})
    try:
        raw = RawSend(service.seqs.engine)  # type: ignore[attr-defined]
        for callers in (int(n) for n in args.callers.split(",")):
            for scenario in SCENARIOS:
                cells = {c.arm: c for c in measure(service, raw, scenario, callers, args.calls)}
                ratio = cells["raw"].calls_per_s / cells["service"].calls_per_s
                for cell in cells.values():
                    print(
                        f"{args.layout} {scenario:4} callers={callers:<3} {cell.arm:7}"
                        f" {cell.calls_per_s:9.0f} calls/s  p99 {cell.p99_ms:7.2f} ms"
                    )
                print(f"{args.layout} {scenario:4} callers={callers:<3} raw/service {ratio:.2f}")
    finally:
        service.close()


if __name__ == "__main__":
    main()
