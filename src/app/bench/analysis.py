"""What the numbers say: bucket/row ratios per engine, readings, and the issue's targets.

Everything here is a pure function of a results dict (the content of results.json), so a
report can be re-rendered, or two runs compared, from the JSON alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Results = dict[str, Any]
BackendResults = dict[str, Any]  # one entry of results["backends"]

MAKE_BENCH_BUDGET_S = 180
DEFAULT_LABELS = ("memory", "sql-row/sqlite", "sql-bucket/sqlite")

# What each workload stands for in a design review.
_MEANING = {
    "ingest": "The write path of every message: one conditional write per bucket and batch vs "
    "one row per message.",
    "redeliver": "Idempotent redelivery: the cost of detecting duplicates without writing.",
    "pull_latest": "Opening a chat, the hottest read: the bucket layout's main promise.",
    "pull_range": "Scrolling back 100 messages: one or two buckets vs 100 rows.",
    "pull_scattered": "Random seqs touch up to 20 buckets: the bucket layout's worst read.",
    "revoke": "A tag write: a slot rewritten inside its bucket vs one row updated.",
    "delete_for_me": "Per-user tags: a set-add inside a bucket vs a row in a deletions table.",
    "hot_delete": "One slot's deleted-by list grows with every user, and so does each bucket "
    "rewrite.",
    "mark_read": "A read receipt over the latest messages: one bucket patch vs up to 20 rows.",
    "purge": "Physical delete: slots cleared inside a bucket vs rows wiped.",
    "clear_small": "Clear history is a watermark write in both layouts.",
    "clear_largest": "Clear history is a watermark write in both layouts, whatever the size.",
}


@dataclass(frozen=True, slots=True)
class Pair:
    """A bucket store and the row store of the same family, engine and cache."""

    engine: str
    bucket: BackendResults
    row: BackendResults

    @property
    def name(self) -> str:
        """E.g. ``sql/sqlite``, ``mongo/mongodb+redis`` or ``mongo/mongodb (emulated)``."""
        cache = "" if self.bucket["cache"] == "none" else f"+{self.bucket['cache']}"
        emulated = " (emulated)" if self.bucket.get("emulated") else ""
        return f"{self.bucket['family']}/{self.engine}{cache}{emulated}"


def ok_backends(results: Results) -> list[BackendResults]:
    """Backends that ran."""
    return [b for b in results["backends"] if b["status"] == "ok"]


def workload_titles(results: Results, layouts_only: bool = False) -> dict[str, str]:
    """Workload name -> title, in run order; layouts_only leaves out the raw-driver arm."""
    return {
        w["name"]: w["title"]
        for w in results["parameters"]["workloads"]
        if not (layouts_only and w["name"].startswith("raw_"))
    }


def pairs(results: Results) -> list[Pair]:
    """Every (bucket, row) pair of the run that differs only in layout."""
    found = []
    backends = ok_backends(results)
    for bucket in backends:
        if bucket["layout"] != "bucket" or bucket["family"] == "memory":
            continue
        if not _nearest_default(bucket, backends):
            continue  # a sweep: the size nearest OpenIM's 100 stands for the bucket layout
        for row in backends:
            same = all(row[k] == bucket[k] for k in ("family", "engine", "cache"))
            if same and row["layout"] == "row":
                found.append(Pair(bucket["engine"], bucket, row))
                break
    return found


def _nearest_default(bucket: BackendResults, backends: list[BackendResults]) -> bool:
    """Whether no other size of this bucket backend is nearer to 100 slots."""
    if "bucket_size" not in bucket:
        return True
    keys = ("store", "family", "engine", "cache")

    def distance(b: BackendResults) -> tuple[int, int]:
        size = int(b.get("bucket_size", 100))
        return abs(size - 100), size

    same = [b for b in backends if all(b[k] == bucket[k] for k in keys)]
    return min(same, key=distance) is bucket


def p50(backend: BackendResults, workload: str) -> float | None:
    """Median latency in µs, None when the workload did not run."""
    run = backend.get("workloads", {}).get(workload)
    return None if run is None or not run["ops"] else float(run["latency_us"]["p50"])


def trips(backend: BackendResults, workload: str) -> float | None:
    """Mean round trips per operation."""
    run = backend.get("workloads", {}).get(workload)
    return None if run is None else float(run["round_trips"]["per_op"])


def ratio(a: float | None, b: float | None) -> float | None:
    """Return a / b when both are known and b is not zero."""
    return None if a is None or b is None or b == 0 else a / b


def fmt_us(us: float | None) -> str:
    """A latency for people: µs, ms or s."""
    if us is None:
        return "–"
    if us < 1_000:
        return f"{us:.0f} µs"
    if us < 1_000_000:
        return f"{us / 1_000:.3g} ms"
    return f"{us / 1_000_000:.3g} s"


def fmt_ratio(value: float | None) -> str:
    """A ratio as ``0.42×``."""
    return "–" if value is None else f"{value:.2f}×"


def fmt_num(value: float | None, digits: int = 2) -> str:
    """A number without trailing zeros."""
    if value is None:
        return "–"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def reading(pair: Pair, workload: str, title: str) -> tuple[str, str] | None:
    """Two lines saying what the bucket/row ratio of one workload means on one engine."""
    bucket, row = p50(pair.bucket, workload), p50(pair.row, workload)
    value = ratio(bucket, row)
    if value is None:
        return None
    if value < 0.8:
        verdict = f"the bucket layout is {1 / value:.1f}× faster"
    elif value > 1.25:
        verdict = f"the row layout is {value:.1f}× faster"
    else:
        verdict = "both layouts are on par (within 25 %)"
    first = (
        f"{title} on {pair.name}: p50 {fmt_us(bucket)} (bucket) vs {fmt_us(row)} (row), "
        f"ratio {fmt_ratio(value)}: {verdict}."
    )
    tb, tr = trips(pair.bucket, workload), trips(pair.row, workload)
    if tb is None or tr is None or abs(tb - tr) < 0.05:
        why = f"Both need {fmt_num(tb)} round trips per op, so the gap is the work per round trip."
    else:
        fewer, faster = tb < tr, value < 1
        more = "fewer" if fewer else "more"
        why = f"It needs {more} round trips ({fmt_num(tb)} vs {fmt_num(tr)})"
        if fewer == faster:
            why += ", which accounts for part of the gap."
        else:
            cost = "cheaper" if faster else "dearer"
            why += f", so each of its round trips is {cost} than the row layout's."
    meaning = _MEANING.get(workload, "")
    second = f"{why} {meaning}".strip()
    return first, second


def verdict_summary(pair: Pair, titles: dict[str, str]) -> str:
    """One sentence: on which workloads each layout wins, and the index size ratio."""
    faster: list[str] = []
    slower: list[str] = []
    even: list[str] = []
    for name, title in titles.items():
        value = ratio(p50(pair.bucket, name), p50(pair.row, name))
        if value is not None:
            (faster if value < 0.8 else slower if value > 1.25 else even).append(title)
    total = len(faster) + len(slower) + len(even)
    parts = [f"On {pair.name} the bucket layout is faster on {len(faster)} of {total} workloads"]
    if faster:
        parts[0] += f" ({', '.join(faster)})"
    parts.append(f"slower on {len(slower)}" + (f" ({', '.join(slower)})" if slower else ""))
    parts.append(f"on par on {len(even)}")
    bucket = pair.bucket.get("footprint", {}).get("after_ingest", {})
    row = pair.row.get("footprint", {}).get("after_ingest", {})
    index = ratio(bucket.get("index_bytes_per_message"), row.get("index_bytes_per_message"))
    data = ratio(bucket.get("data_bytes_per_message"), row.get("data_bytes_per_message"))
    text = ", ".join(parts) + "."
    if index is not None and data is not None:
        text += f" It stores {fmt_ratio(data)} the data bytes and {fmt_ratio(index)} the index "
        text += "bytes per message of the row layout."
    return text


def pair_rows(pair: Pair, titles: dict[str, str]) -> Iterator[list[str]]:
    """Table rows of one pair: workload, p50 row, p50 bucket, ratio, round trips."""
    for name, title in titles.items():
        row, bucket = p50(pair.row, name), p50(pair.bucket, name)
        if row is None and bucket is None:
            continue
        yield [
            title,
            fmt_us(row),
            fmt_us(bucket),
            fmt_ratio(ratio(bucket, row)),
            f"{fmt_num(trips(pair.row, name))} → {fmt_num(trips(pair.bucket, name))}",
        ]


@dataclass(frozen=True, slots=True)
class Target:
    """One measured line of the issue's targets."""

    target: str
    scope: str
    measured: str
    passed: bool | None  # None: not measured in this run
    note: str = ""

    @property
    def verdict(self) -> str:
        """pass, FAIL or n/a."""
        return {True: "pass", False: "FAIL", None: "n/a"}[self.passed]


def targets(results: Results) -> list[Target]:
    """The issue's targets, measured on this run."""
    found: list[Target] = []
    every = ok_backends(results)
    # In a sweep the size nearest OpenIM's 100 stands for each bucket backend.
    backends = [b for b in every if _nearest_default(b, every)]
    found += _latest_targets(backends)
    found += _clear_targets(backends)
    found += _overhead_targets(backends)
    found += _index_targets(results)
    found.append(_duration_target(results))
    return found


def _latest_targets(backends: list[BackendResults]) -> list[Target]:
    found = []
    for b in backends:
        run = b["workloads"].get("pull_latest")
        if run is None:
            continue
        rt = run["round_trips"]
        cached = b["cache"] != "none"
        value = rt["typical"] if cached else rt["max"]
        note = f"cache misses take up to {rt['max']}" if cached and rt["max"] > value else ""
        measured = f"{'typical' if cached else 'max'} {value} round trips"
        found.append(
            Target("pull_latest(20) ≤ 2 round trips", b["label"], measured, value <= 2, note)
        )
    if not found:
        found.append(Target("pull_latest(20) ≤ 2 round trips", "–", "not run", None))
    return found


def _clear_targets(backends: list[BackendResults]) -> list[Target]:
    found = []
    for b in backends:
        small, large = b["workloads"].get("clear_small"), b["workloads"].get("clear_largest")
        if small is None or large is None:
            continue
        writes = {small["round_trips"]["writes_per_op"], large["round_trips"]["writes_per_op"]}
        same_trips = small["round_trips"]["per_op"] == large["round_trips"]["per_op"]
        growth = ratio(p50(b, "clear_largest"), p50(b, "clear_small"))
        flat = growth is not None and growth <= 1.5
        measured = (
            f"writes/op {', '.join(fmt_num(w) for w in sorted(writes))}; round trips "
            f"{fmt_num(small['round_trips']['per_op'])} vs "
            f"{fmt_num(large['round_trips']['per_op'])}; "
            f"p50 largest/small {fmt_ratio(growth)}"
        )
        found.append(
            Target(
                "clear_history: one write, flat cost",
                b["label"],
                measured,
                writes == {1.0} and same_trips and flat,
                "flat = p50 on the largest within 1.5× of a ≤100-message conversation",
            )
        )
    return found


def _overhead_targets(backends: list[BackendResults]) -> list[Target]:
    found = []
    for b in backends:
        value = ratio(p50(b, "pull_latest"), p50(b, "raw_pull_latest"))
        if value is None:
            continue
        found.append(
            Target(
                "service overhead ≤ 1.5× raw driver",
                b["label"],
                f"pull_latest(20) p50 {fmt_us(p50(b, 'pull_latest'))} vs raw "
                f"{fmt_us(p50(b, 'raw_pull_latest'))} = {fmt_ratio(value)}",
                value <= 1.5,
            )
        )
    if not found:
        found.append(
            Target("service overhead ≤ 1.5× raw driver", "–", "no uncached sql-row backend", None)
        )
    return found


def _index_targets(results: Results) -> list[Target]:
    found = []
    for pair in pairs(results):
        if pair.bucket["family"] != "sql" or pair.bucket["cache"] != "none":
            continue
        bucket = pair.bucket.get("footprint", {}).get("after_ingest", {})
        row = pair.row.get("footprint", {}).get("after_ingest", {})
        value = ratio(bucket.get("index_bytes_per_message"), row.get("index_bytes_per_message"))
        found.append(
            Target(
                "sql-bucket index bytes/msg ≤ 1/20 of sql-row",
                pair.engine,
                f"{fmt_num(bucket.get('index_bytes_per_message'))} vs "
                f"{fmt_num(row.get('index_bytes_per_message'))} B/msg = "
                + ("–" if value is None else f"1/{1 / value:.0f}" if value else "0"),
                None if value is None else value <= 1 / 20,
            )
        )
    if not found:
        found.append(
            Target("sql-bucket index bytes/msg ≤ 1/20 of sql-row", "–", "no SQL pair", None)
        )
    return found


def _duration_target(results: Results) -> Target:
    labels = tuple(b["label"] for b in results["backends"])
    default = labels == DEFAULT_LABELS and results["parameters"]["scale"] == "small"
    cores = results["machine"].get("cpu_count")
    measured = f"{results['duration_s']:.0f} s on {cores} cores"
    if not default:
        return Target(
            "make bench < 3 min on 2 cores", "this run", measured, None, "not the default"
        )
    return Target(
        "make bench < 3 min on 2 cores",
        "embedded default",
        measured,
        results["duration_s"] < MAKE_BENCH_BUDGET_S,
        "bench run only; a fresh clone adds the .venv install",
    )


def analysis(results: Results) -> dict[str, Any]:
    """Ratios, readings and targets in JSON form (stored in results.json too)."""
    titles = workload_titles(results, layouts_only=True)
    ratios = []
    for pair in pairs(results):
        for name, title in titles.items():
            lines = reading(pair, name, title)
            if lines is None:
                continue
            ratios.append(
                {
                    "engine": pair.name,
                    "workload": name,
                    "p50_ratio": round(ratio(p50(pair.bucket, name), p50(pair.row, name)) or 0, 4),
                    "round_trips": [trips(pair.row, name), trips(pair.bucket, name)],
                    "reading": list(lines),
                }
            )
    return {
        "ratios": ratios,
        "targets": [
            {"target": t.target, "scope": t.scope, "measured": t.measured, "passed": t.passed}
            | ({"note": t.note} if t.note else {})
            for t in targets(results)
        ],
    }
