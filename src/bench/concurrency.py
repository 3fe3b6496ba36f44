"""What the contention runs say: throughput, p99 and conflicts per write against N workers.

Pure functions of the backends that ran (``RunResults.ok_backends()``); each may carry
``contention``, the runs ``imbucket.bench.contention`` measured.
"""

from __future__ import annotations

from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.results import BackendResult, ContentionRun

Backends = list[BackendResult]  # the backends that ran

SCENARIO_TITLES = {
    "hot_group": "one hot group",
    "many_groups": "many groups",
    "readers": "readers while writing",
}
CONFLICT_TITLES = {
    "bucket_create_lost": "bucket-creation races lost",
    "bucket_update_lost": "conditional bucket updates lost",
    "row_upsert_lost": "row upserts collided",
    "sql_retry": "SQL statements retried (deadlock, serialization, lock timeout, locked)",
}


def runs(backend: BackendResult, scenario: str, mode: str) -> dict[int, ContentionRun]:
    """The runs of one backend, scenario and mode, by number of workers."""
    return {r.workers: r for r in backend.contention if r.scenario == scenario and r.mode == mode}


def ran(backends: Backends) -> bool:
    """Whether any backend has contention runs."""
    return any(b.contention for b in backends)


def workers(backends: Backends) -> list[int]:
    """Every number of workers that ran, ascending."""
    return sorted({r.workers for b in backends for r in b.contention})


def scenarios(backends: Backends) -> list[str]:
    """The scenarios that ran, in the order of SCENARIO_TITLES."""
    found = {r.scenario for b in backends for r in b.contention}
    return [s for s in SCENARIO_TITLES if s in found]


def rows(backends: Backends, scenario: str) -> list[tuple[str, ...]]:
    """Table rows: backend, workers, ops/s, p99 and conflicts per write at each N, errors."""
    counts = workers(backends)
    out = []
    for b in backends:
        for mode in ("threads", "processes"):
            found = runs(b, scenario, mode)
            if not found:
                continue
            cells = [b.label, mode]
            cells += [fmt_num(found[n].ops_per_s, 0) if n in found else "–" for n in counts]
            cells += [fmt_us(found[n].latency_us.p99) if n in found else "–" for n in counts]
            cells += [fmt_num(found[n].conflicts_per_write, 3) if n in found else "–"
                      for n in counts]  # fmt: skip
            cells.append(str(sum(r.errors for r in found.values())))
            out.append(tuple(cells))
    return out


def stopped(backends: Backends, scenario: str) -> str:
    """A sentence naming the runs the deadline stopped early (done/planned), or ""."""
    said = []
    for b in backends:
        for mode in ("threads", "processes"):
            early = _short(runs(b, scenario, mode))
            if early:
                said.append(f"{b.label} {mode} {early}")
    return ("Stopped by the deadline (done/planned): " + "; ".join(said) + ".") if said else ""


def headers(backends: Backends) -> tuple[str, ...]:
    """Headers of the rows table."""
    counts = workers(backends)
    return (
        "backend",
        "workers",
        *(f"ops/s N={n}" for n in counts),
        *(f"p99 N={n}" for n in counts),
        *(f"conflicts/write N={n}" for n in counts),
        "errors",
    )


def _short(found: dict[int, ContentionRun]) -> str:
    """Which runs the deadline stopped before their planned operations."""
    early = [f"N={n} {r.ops}/{r.planned}" for n, r in sorted(found.items()) if r.ops < r.planned]
    return ", ".join(early)


def conflict_kinds(backends: Backends, scenario: str) -> dict[str, int]:
    """Conflicts of every kind counted in a scenario, over all backends and runs."""
    total: dict[str, int] = {}
    for b in backends:
        for r in b.contention:
            if r.scenario == scenario:
                for kind, n in r.conflicts.items():
                    total[kind] = total.get(kind, 0) + n
    return total


def reading(backends: Backends, scenario: str) -> str:
    """A paragraph: how throughput scales from the fewest to the most workers, per backend.

    And, where a bucket and a row backend of one engine both ran, which layout holds up
    better at the most workers, and what the stores counted as conflicts.
    """
    counts = workers(backends)
    if len(counts) < 2:
        return ""
    low, high = counts[0], counts[-1]
    scaling = []
    at_high: dict[str, tuple[float, BackendResult]] = {}
    for b in backends:
        found = runs(b, scenario, "threads")
        if low in found and high in found and found[low].ops_per_s:
            factor = found[high].ops_per_s / found[low].ops_per_s
            scaling.append(f"{b.label} {factor:.1f}×")
            at_high[b.label] = (found[high].ops_per_s, b)
    if not scaling:
        return ""
    text = f"From {low} to {high} threads, throughput changes by " + ", ".join(scaling) + "."
    text += _layouts(at_high, high)
    kinds = {k: n for k, n in conflict_kinds(backends, scenario).items() if n}
    if kinds:
        said = ", ".join(f"{n} {CONFLICT_TITLES.get(k, k)}" for k, n in kinds.items())
        text += f" The stores counted {said} in this scenario."
    else:
        text += " The stores counted no conflict or retry in this scenario."
    return text


def _layouts(at_high: dict[str, tuple[float, BackendResult]], high: int) -> str:
    said = []
    for label, (bucket_rate, bucket) in at_high.items():
        if bucket.layout != "bucket" or bucket.family == "memory":
            continue
        for other_rate, row in at_high.values():
            if row.engine_key == bucket.engine_key and row.layout == "row" and other_rate:
                said.append(f"{label} reaches {bucket_rate / other_rate:.2f}× the row layout's")
    return f" At {high} threads " + "; ".join(said) + " throughput." if said else ""


def series(backend: BackendResult, scenario: str, mode: str) -> tuple[list[int], list[float]]:
    """Workers and throughput of one backend, scenario and mode (for the chart)."""
    found = runs(backend, scenario, mode)
    counts = sorted(found)
    return counts, [float(found[n].ops_per_s) for n in counts]


def analysis(backends: Backends) -> dict[str, str]:
    """The reading of each scenario (results.json holds the runs themselves per backend)."""
    return {s: reading(backends, s) for s in scenarios(backends)}
