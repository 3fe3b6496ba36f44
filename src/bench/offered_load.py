"""Latency at offered load: a workload mix driven at fixed rates, without coordinated omission.

Every other workload runs closed-loop: an operation starts when the previous one ends, so a
slow operation delays the next instead of making it wait, and the latency a user would see
at a given load is never measured. Here the operations of a mix (the traffic's reads and
read receipts, repeatable on a loaded store) are scheduled at a fixed rate: operation i is
due at ``start + i / rate``, and its latency is counted from that intended start, so a late
start (the previous operation ran long, the machine stalled) counts as latency as it would
for a user. The rates are fractions of the closed-loop throughput the run measured on the
engine's slower layout, so both layouts of an engine meet the same offered rates.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hdrh.histogram import HdrHistogram

from imbucket.bench.blocks import Block, Figure, Heading, Para, Table
from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.results import BackendResult, Latency, OfferedRun, RunResults
from imbucket.bench.traffic import Traffic
from imbucket.bench.workloads import BenchCheckFailed, Op, Subject

# The mix: operations that can run again on a loaded store (reads, read receipts).
WORKLOADS = ("pull_latest", "pull_range", "pull_scattered", "mark_read")
DEFAULT_RATES = "50%,70%,90%"
LATE_S = 0.001  # a start this much after its intended start counts as late
_MAX_US = 600_000_000


@dataclass(frozen=True, slots=True)
class Rate:
    """An offered rate: a fraction of the closed-loop throughput, or ops/s."""

    fraction: float = 0.0  # 0: absolute
    ops_per_s: float = 0.0

    def resolve(self, closed_loop: float) -> float:
        """Operations per second to offer, given the closed-loop throughput."""
        return self.ops_per_s if not self.fraction else self.fraction * closed_loop


@dataclass(frozen=True, slots=True)
class Budget:
    """How long one rate runs on one backend: at most ops operations and seconds."""

    ops: int
    seconds: float


BUDGETS = {
    "tiny": Budget(40, 0.3),
    "small": Budget(150, 0.6),
    "medium": Budget(2_000, 10.0),
    "large": Budget(5_000, 20.0),
}


class RateError(ValueError):
    """A --rate value that is neither a percentage nor a positive number of ops/s."""


def parse_rates(text: str) -> tuple[Rate, ...]:
    """``50%,70%,90%`` (of the closed-loop throughput) or ``200,400`` (ops/s), or a mix."""
    rates = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = float(part.rstrip("%"))
        except ValueError:
            raise RateError(f"rate {part!r}: expected e.g. 70% or 400 (ops/s)") from None
        if value <= 0:
            raise RateError(f"rate {part!r}: must be positive")
        rates.append(Rate(fraction=value / 100) if part.endswith("%") else Rate(ops_per_s=value))
    if not rates:
        raise RateError("no rate given")
    return tuple(rates)


def mix(traffic: Traffic | None, available: Sequence[str]) -> dict[str, float]:
    """The weights of the load mix: the traffic's weights of WORKLOADS that ran."""
    weights = (traffic or Traffic()).weights()
    found = {n: weights.get(n, 0.0) for n in WORKLOADS if n in available}
    return {n: w for n, w in found.items() if w > 0}


def sequence(
    plans: dict[str, list[Op]], weights: dict[str, float], count: int, seed: int
) -> list[Op]:
    """Count operations drawn from the plans by weight: the same for every backend."""
    rng = random.Random(f"offered-load-{seed}")
    names = list(weights)
    picks = rng.choices(names, [weights[n] for n in names], k=count)
    return [rng.choice(plans[name]) for name in picks]


def measure(
    entries: Sequence[tuple[BackendResult, Subject]],
    plans: dict[str, list[Op]],
    traffic: Traffic | None,
    rates: Sequence[Rate],
    budget: Budget,
    seed: int,
    started: Callable[[str, str], None] = lambda label, title: None,
) -> None:
    """Run the mix at each rate on every backend and store the runs in each one's result.

    At each rate the backends take turns, the first changing from rate to rate.
    The in-process memory backend is left out: it has no engine to load.
    """
    weights = mix(traffic, [n for n in plans if plans[n]])
    entries = [(r, s) for r, s in entries if r.family != "memory"]
    if not weights or not entries:
        return
    ops = sequence(plans, weights, budget.ops, seed)
    closed: dict[tuple[str, str, str], float] = {}
    for result, _ in entries:
        found = closed_loop(result, weights)
        if found:
            key = result.engine_key
            closed[key] = min(found, closed.get(key, found))
    for k, rate in enumerate(rates):
        turn = k % len(entries)
        for result, subject in [*entries[turn:], *entries[:turn]]:
            per_s = rate.resolve(closed.get(result.engine_key, 0.0))
            if per_s <= 0:
                continue
            started(result.label, f"offered load {fmt_num(per_s, 0)} ops/s")
            # as many operations as the rate fits in the time budget, at most budget.ops
            count = max(1, min(len(ops), int(per_s * budget.seconds)))
            thunks = [_prepared(op, subject) for op in ops[:count]]
            run = drive(thunks, per_s, budget.seconds)
            result.offered.append(offered(rate.fraction, per_s, count, run))


def _prepared(op: Op, subject: Subject) -> Callable[[], Callable[[], object]]:
    return lambda: op.prepare(subject)


@dataclass
class Schedule:
    """The outcome of one offered-load run."""

    histogram: HdrHistogram
    done: int = 0
    late: int = 0
    errors: int = 0
    seconds: float = 0.0


def drive(
    thunks: Sequence[Callable[[], Callable[[], object]]],
    rate: float,
    deadline_s: float,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> Schedule:
    """Run thunks (each prepares then returns the call to time) at a fixed rate.

    Operation i is due at start + i / rate: the driver sleeps until then when early, starts
    at once when late, and records the latency from the intended start. It stops before an
    operation due after the deadline (the rest are counted as not done).
    """
    found = Schedule(HdrHistogram(1, _MAX_US, 3))
    start = clock()
    for i, make in enumerate(thunks):
        intended = start + i / rate
        if intended - start > deadline_s:
            break
        call = make()  # untimed preparation, though a slow one delays the start
        now = clock()
        if now < intended:
            sleep(intended - now)
        elif now - intended > LATE_S:
            found.late += 1
        try:
            call()
        except BenchCheckFailed:
            pass  # it answered: the earlier tag writes cleared or purged what its check expects
        except Exception:  # a failing operation is a result to report, not a crash
            found.errors += 1
        found.histogram.record_value(max(1, round((clock() - intended) * 1_000_000)))
        found.done += 1
    found.seconds = clock() - start
    return found


def offered(fraction: float, rate: float, planned: int, run: Schedule) -> OfferedRun:
    """The result of one run."""
    h = run.histogram
    latency = Latency(
        p50=h.get_value_at_percentile(50),
        p99=h.get_value_at_percentile(99),
        max=h.get_max_value() if run.done else 0,
    )
    achieved = run.done / run.seconds if run.seconds else 0.0
    return OfferedRun(
        fraction=fraction,
        offered_ops_per_s=round(rate, 1),
        achieved_ops_per_s=round(achieved, 1),
        ops=run.done,
        planned=planned,
        latency_us=latency,
        p999_us=h.get_value_at_percentile(99.9),
        late=run.late,
        errors=run.errors,
        histogram=h.encode().decode("ascii") if run.done else "",
    )


def closed_loop(backend: BackendResult, weights: dict[str, float]) -> float | None:
    """Operations per second of the mix, one at a time: 1 / the mix-weighted mean latency."""
    known = {n: w for n, w in weights.items() if n in backend.workloads}
    total = sum(known.values())
    if not total:
        return None
    mean = 0.0
    for name, weight in known.items():
        latency = backend.workloads[name].latency_us
        mean += weight * float(latency.mean or latency.p50)
    mean /= total
    return 1_000_000 / mean if mean else None


# --- the report section -------------------------------------------------------------------

_HEADERS = ("backend", "rate", "offered ops/s", "achieved ops/s", "p50", "p99", "p99.9", "late",
            "done/planned")  # fmt: skip


def rows(backends: Sequence[BackendResult]) -> list[tuple[str, ...]]:
    """One table row per backend and rate."""
    out: list[tuple[str, ...]] = []
    for b in backends:
        for r in b.offered:
            rate = f"{r.fraction:.0%}" if r.fraction else "fixed"
            out.append(
                (
                    b.label,
                    rate,
                    fmt_num(r.offered_ops_per_s, 0),
                    fmt_num(r.achieved_ops_per_s, 0),
                    fmt_us(r.latency_us.p50),
                    fmt_us(r.latency_us.p99),
                    fmt_us(r.p999_us),
                    str(r.late),
                    f"{r.ops}/{r.planned}" + (f", {r.errors} failed" if r.errors else ""),
                )
            )
    return out


def blocks(results: RunResults) -> list[Block]:
    """The report's "Latency at offered load" section (empty when nothing ran)."""
    backends = [b for b in results.ok_backends() if b.offered]
    if not backends:
        return []
    names = ", ".join(WORKLOADS)
    return [
        Heading(2, "Latency at offered load"),
        Para(
            f"A mix of {names} (the traffic's weights) offered at fixed rates, as fractions "
            "of the closed-loop throughput the run measured on each engine's slower layout, "
            "so both layouts of an engine meet the same rates. Each operation's latency "
            "counts from its intended start (start + i / rate), so a late start counts as a "
            "user would feel it (no coordinated omission); 'late' counts operations that "
            f"started over {LATE_S * 1000:g} ms after their intended start. Recorded in HDR "
            "histograms; the layouts take turns at each rate."
        ),
        Table(_HEADERS, tuple(rows(backends))),
        Figure(
            "offered-load.png",
            chart(backends),
            "p99 (solid) and p50 (dashed) latency against achieved throughput, per backend",
        ),
    ]


def chart(backends: Sequence[BackendResult]) -> bytes:
    """p99 and p50 against achieved throughput, one line per backend."""
    import matplotlib.pyplot as plt

    from imbucket.bench.charts import _finish, _png

    figure, axes = plt.subplots(figsize=(10, 4.5))
    for k, b in enumerate(backends):
        xs = [r.achieved_ops_per_s for r in b.offered]
        axes.plot(xs, [r.latency_us.p99 for r in b.offered], "o-", color=f"C{k}", label=b.label)
        axes.plot(xs, [r.latency_us.p50 for r in b.offered], "o--", color=f"C{k}", alpha=0.6)
    axes.set_yscale("log")
    axes.set_xlabel("achieved throughput (ops/s)")
    axes.set_ylabel("latency from intended start (µs, log)")
    _finish(axes)
    return _png(figure)
