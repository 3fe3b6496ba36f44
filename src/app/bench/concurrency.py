"""What the contention runs say: throughput, p99 and conflicts per write against N workers.

Pure functions of a results dict (results.json); each backend may carry ``contention``, a
list of runs ``{scenario, mode, workers, ops, planned, ops_per_s, latency_us, conflicts,
conflicts_per_write, errors}`` written by ``app.bench.contention``.
"""

from __future__ import annotations

from typing import Any

from app.bench.analysis import BackendResults, Results, fmt_num, fmt_us, ok_backends

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


def runs(backend: BackendResults, scenario: str, mode: str) -> dict[int, dict[str, Any]]:
    """The runs of one backend, scenario and mode, by number of workers."""
    return {
        int(r["workers"]): r
        for r in backend.get("contention", [])
        if r["scenario"] == scenario and r["mode"] == mode
    }


def ran(results: Results) -> bool:
    """Whether any backend has contention runs."""
    return any(b.get("contention") for b in ok_backends(results))


def workers(results: Results) -> list[int]:
    """Every number of workers that ran, ascending."""
    return sorted(
        {int(r["workers"]) for b in ok_backends(results) for r in b.get("contention", [])}
    )


def scenarios(results: Results) -> list[str]:
    """The scenarios that ran, in the order of SCENARIO_TITLES."""
    found = {r["scenario"] for b in ok_backends(results) for r in b.get("contention", [])}
    return [s for s in SCENARIO_TITLES if s in found]


def rows(results: Results, scenario: str) -> list[tuple[str, ...]]:
    """Table rows: backend, workers, ops/s, p99 and conflicts per write at each N, errors."""
    counts = workers(results)
    out = []
    for b in ok_backends(results):
        for mode in ("threads", "processes"):
            found = runs(b, scenario, mode)
            if not found:
                continue
            cells = [b["label"], mode]
            cells += [fmt_num(found[n]["ops_per_s"], 0) if n in found else "–" for n in counts]
            cells += [fmt_us(found[n]["latency_us"]["p99"]) if n in found else "–" for n in counts]
            cells += [fmt_num(found[n]["conflicts_per_write"], 3) if n in found else "–"
                      for n in counts]  # fmt: skip
            cells.append(str(sum(r["errors"] for r in found.values())))
            out.append(tuple(cells))
    return out


def stopped(results: Results, scenario: str) -> str:
    """A sentence naming the runs the deadline stopped early (done/planned), or ""."""
    said = []
    for b in ok_backends(results):
        for mode in ("threads", "processes"):
            early = _short(runs(b, scenario, mode))
            if early:
                said.append(f"{b['label']} {mode} {early}")
    return ("Stopped by the deadline (done/planned): " + "; ".join(said) + ".") if said else ""


def headers(results: Results) -> tuple[str, ...]:
    """Headers of the rows table."""
    counts = workers(results)
    return (
        "backend",
        "workers",
        *(f"ops/s N={n}" for n in counts),
        *(f"p99 N={n}" for n in counts),
        *(f"conflicts/write N={n}" for n in counts),
        "errors",
    )


def _short(found: dict[int, dict[str, Any]]) -> str:
    """Which runs the deadline stopped before their planned operations."""
    early = [
        f"N={n} {r['ops']}/{r['planned']}"
        for n, r in sorted(found.items())
        if r["ops"] < r["planned"]
    ]
    return ", ".join(early)


def conflict_kinds(results: Results, scenario: str) -> dict[str, int]:
    """Conflicts of every kind counted in a scenario, over all backends and runs."""
    total: dict[str, int] = {}
    for b in ok_backends(results):
        for r in b.get("contention", []):
            if r["scenario"] == scenario:
                for kind, n in r["conflicts"].items():
                    total[kind] = total.get(kind, 0) + n
    return total


def reading(results: Results, scenario: str) -> str:
    """A paragraph: how throughput scales from the fewest to the most workers, per backend.

    And, where a bucket and a row backend of one engine both ran, which layout holds up
    better at the most workers, and what the stores counted as conflicts.
    """
    counts = workers(results)
    if len(counts) < 2:
        return ""
    low, high = counts[0], counts[-1]
    scaling = []
    at_high: dict[str, tuple[float, BackendResults]] = {}
    for b in ok_backends(results):
        found = runs(b, scenario, "threads")
        if low in found and high in found and found[low]["ops_per_s"]:
            factor = found[high]["ops_per_s"] / found[low]["ops_per_s"]
            scaling.append(f"{b['label']} {factor:.1f}×")
            at_high[b["label"]] = (found[high]["ops_per_s"], b)
    if not scaling:
        return ""
    text = f"From {low} to {high} threads, throughput changes by " + ", ".join(scaling) + "."
    text += _layouts(at_high, high)
    kinds = {k: n for k, n in conflict_kinds(results, scenario).items() if n}
    if kinds:
        said = ", ".join(f"{n} {CONFLICT_TITLES.get(k, k)}" for k, n in kinds.items())
        text += f" The stores counted {said} in this scenario."
    else:
        text += " The stores counted no conflict or retry in this scenario."
    return text


def _layouts(at_high: dict[str, tuple[float, BackendResults]], high: int) -> str:
    said = []
    for label, (bucket_rate, bucket) in at_high.items():
        if bucket["layout"] != "bucket" or bucket["family"] == "memory":
            continue
        for other_rate, row in at_high.values():
            same = all(row[k] == bucket[k] for k in ("family", "engine", "cache"))
            if same and row["layout"] == "row" and other_rate:
                said.append(f"{label} reaches {bucket_rate / other_rate:.2f}× the row layout's")
    return f" At {high} threads " + "; ".join(said) + " throughput." if said else ""


def series(backend: BackendResults, scenario: str, mode: str) -> tuple[list[int], list[float]]:
    """Workers and throughput of one backend, scenario and mode (for the chart)."""
    found = runs(backend, scenario, mode)
    counts = sorted(found)
    return counts, [float(found[n]["ops_per_s"]) for n in counts]


def analysis(results: Results) -> dict[str, Any]:
    """The readings in JSON form (results.json holds the runs themselves per backend)."""
    return {s: reading(results, s) for s in scenarios(results)}
