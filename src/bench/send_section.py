"""The report's sends against the raw driver: ``MessageService.send`` beside ``RawSend``.

After every other workload, each uncached SQL backend sends fresh drafts from 1, 8 and 64
caller threads, to many conversations (each call its own) and to one hot group, through the
service and through the raw-driver arm (``imbucket.bench.instrument.raw_send``), the arms
alternating in rounds (``imbucket.bench.send_bench.measure``). Every call goes to a
conversation of its own run, never one of the dataset's, so nothing else in the report sees
these sends. This module measures, says which backends were left out and why, and renders
the section; the target line lives in ``imbucket.bench.targets``.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from imbucket.app.service import MessageService
from imbucket.bench import send_bench
from imbucket.bench.blocks import Block, Bullets, Heading, Para, Table
from imbucket.bench.formatting import fmt_num, fmt_ratio, fmt_us
from imbucket.bench.instrument.raw_send import RawSend
from imbucket.bench.results import BackendResult, RunResults, SendPlan, SendRun

TITLE = "Sends against the raw driver"
CALLERS = (1, 8, 64)
# Calls per arm and round at each scale: bounded so that `make bench` keeps its budget.
CALLS = {"tiny": 16, "small": 200, "medium": 400, "large": 800}
SCENARIO_TITLES = {"many": "many conversations", "hot": "one hot group"}
RAW_ENGINES = frozenset({"sqlite", "postgresql", "mysql", "mariadb"})  # RawSend speaks these
HEADERS = (
    "scenario",
    "callers",
    "service calls/s",
    "raw calls/s",
    "service p99",
    "raw p99",
    "raw/service",
)


def plan(scale: str) -> SendPlan:
    """The section's size at scale (an unknown scale gets small's)."""
    return SendPlan(CALLERS, CALLS.get(scale, CALLS["small"]), send_bench.ROUNDS)


def unmeasured(backend: BackendResult) -> str | None:
    """Why backend's sends are left out of the section, or None when they are measured."""
    if backend.family == "memory":
        return "in process: no driver to compare with"
    if backend.cache != "none":
        return (
            f"behind {backend.cache}: the raw arm writes the store alone, so the ratio would "
            "charge the cache's work to the service"
        )
    if backend.family != "sql" or backend.engine not in RAW_ENGINES:
        return f"no raw-driver send arm for {backend.engine} (RawSend speaks SQL)"
    if backend.encoding is not None:
        return (
            "an encoding variant, left out as from the contention runs: its layout's sends "
            "are measured at the default encoding"
        )
    return None


def measure(
    service: MessageService, found: SendPlan, progress: Callable[[str], None] = lambda _: None
) -> list[SendRun]:
    """Every scenario at every caller count, service and raw arm alternating in rounds."""
    engine = getattr(service.seqs, "engine", None)
    if not isinstance(engine, Engine):
        raise TypeError("the store's seqs have no SQLAlchemy engine for the raw arm")
    raw = RawSend(engine)
    runs = []
    for callers in found.callers:
        for scenario in send_bench.SCENARIOS:
            progress(f"sends vs raw driver: {SCENARIO_TITLES[scenario]} · {callers} callers")
            calls = max(found.calls, callers)  # every caller sends at least once a round
            cells = {c.arm: c for c in send_bench.measure(service, raw, scenario, callers, calls)}
            service_cell, raw_cell = cells["service"], cells["raw"]
            runs.append(
                SendRun(
                    scenario=scenario,
                    callers=callers,
                    calls=calls,
                    rounds=found.rounds,
                    service_calls_per_s=round(service_cell.calls_per_s, 1),
                    service_p99_ms=round(service_cell.p99_ms, 3),
                    raw_calls_per_s=round(raw_cell.calls_per_s, 1),
                    raw_p99_ms=round(raw_cell.p99_ms, 3),
                )
            )
    return runs


def worst(runs: list[SendRun]) -> SendRun | None:
    """The cell where the service costs most against the raw driver."""
    rated = [r for r in runs if r.cost_ratio is not None]
    return max(rated, key=lambda r: r.cost_ratio or 0.0, default=None)


def cell_name(run: SendRun) -> str:
    """A cell in words: its scenario and caller count."""
    callers = "1 caller" if run.callers == 1 else f"{run.callers} callers"
    return f"{SCENARIO_TITLES.get(run.scenario, run.scenario)} at {callers}"


def row(run: SendRun) -> tuple[str, ...]:
    """One table row of a cell."""
    return (
        SCENARIO_TITLES.get(run.scenario, run.scenario),
        str(run.callers),
        fmt_num(run.service_calls_per_s, 0),
        fmt_num(run.raw_calls_per_s, 0),
        fmt_us(run.service_p99_ms * 1000),
        fmt_us(run.raw_p99_ms * 1000),
        fmt_ratio(run.cost_ratio),
    )


def about(found: SendPlan) -> str:
    """The section's opening paragraph: what ran and how to read it."""
    counts = [str(n) for n in found.callers]
    callers = ", ".join(counts[:-1]) + f" and {counts[-1]}" if len(counts) > 1 else counts[0]
    return (
        f"MessageService.send of one fresh draft per call against the raw-driver arm (the "
        f"fewest hand-written statements that do a send's work on the engine), from {callers} "
        f"caller threads, each scenario in {found.rounds} rounds that alternate the arms, "
        f"{found.calls} calls per arm and round (at least one per caller), after one "
        "unmeasured call per caller of each arm (the pool's connections open for both). "
        "'many conversations':"
        " each call sends to a conversation of its own; 'one hot group': every call sends to "
        "the same group. Every call goes to a conversation of this section's own, never one "
        "of the dataset's, and the section runs after every other workload. Calls/s is an "
        "arm's calls ÷ its wall time over all its rounds; p99 is over all its calls. "
        "raw/service is the raw arm's calls/s ÷ the service's: what a send through the service "
        "costs against the raw driver (1.00× = no overhead), a point ratio over the rounds, "
        "without an interval. Threads share one GIL and, on SQLite, one write lock: at 8 and "
        "64 callers the engine's queueing weighs in both arms."
    )


def blocks(results: RunResults) -> list[Block]:
    """The report's section of sends against the raw driver (none when the run left it out)."""
    found = results.parameters.sends
    if found is None:
        return []
    out: list[Block] = [Heading(2, TITLE), Para(about(found))]
    measured = [b for b in results.ok_backends() if b.sends]
    for b in measured:
        out.append(Heading(3, b.label))
        out.append(Table(HEADERS, tuple(row(r) for r in b.sends)))
    if not measured:
        out.append(Para("No backend of this run had its sends measured."))
    missing = [(f"{b.label}: {b.sends_missing}",) for b in results.ok_backends() if b.sends_missing]
    if missing:
        out += [Para("Not measured:"), Bullets(tuple(missing))]
    return out
