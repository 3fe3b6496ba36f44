"""The answer a design review reads first: per engine, which layout to choose and why.

One generated paragraph per bucket/row pair: the layout to choose for the run's traffic
(one operation of its mix, p50s weighted, with its interval), the workloads each layout wins
with their ratios and intervals, bytes and index bytes per message, pages per operation when
the results carry them, the contention result, and what the verdict depends on.
"""

from __future__ import annotations

from collections.abc import Iterable

from imbucket.bench import concurrency, stats, sweep
from imbucket.bench.analysis import Pair, pairs, variants
from imbucket.bench.defaults import ON_PAR_HIGH, ON_PAR_LOW
from imbucket.bench.formatting import fmt_num
from imbucket.bench.results import ContentionRun, Footprint, RunResults, WorkloadResult
from imbucket.bench.workloads import PULL_RANGE_ITEMS

_CHOSEN = {stats.FASTER: "bucket", stats.SLOWER: "row"}


def answers(results: RunResults) -> list[str]:
    """One paragraph per engine that ran both layouts, in run order."""
    titles = results.parameters.titles(layouts_only=True)
    weights = sweep.mix(results)
    others = variants(results)
    return [paragraph(results, p, titles, weights, others) for p in pairs(results)]


def paragraph(
    results: RunResults,
    pair: Pair,
    titles: dict[str, str],
    weights: dict[str, float],
    others: list[Pair],
) -> str:
    """The answer for one engine."""
    mix = stats.mix_interval(pair.bucket, pair.row, weights)
    word = stats.verdict(mix)
    stage, bucket_bytes, row_bytes = _deciding_bytes(pair)
    choice = _CHOSEN.get(word) or _smaller(bucket_bytes, row_bytes)
    why = _why(word, mix, choice, stage)
    parts = [f"{pair.name}: choose the {choice} layout for this traffic. {why}"]
    parts += _unmeasured(results, pair, weights)
    parts += _wins(pair, titles)
    parts += [_storage(pair, stage)]
    parts += _pages(pair, weights)
    parts += _contention(pair)
    parts.append(_depends(results, pair, weights, others))
    return " ".join(p for p in parts if p)


Bytes = tuple[float, float] | None  # data and index bytes per message

# The footprints the answer reads, the steady state first: after the tag writes, the
# stores hold what a running system holds (deletion lists, revokes, purges), not a fresh load.
_STAGES = (("end", "after the tag writes"), ("after_ingest", "after ingest"))


def _bytes(found: object) -> Bytes:
    if not isinstance(found, Footprint):
        return None
    return found.data_bytes_per_message, found.index_bytes_per_message


def _deciding_bytes(pair: Pair) -> tuple[str, Bytes, Bytes]:
    """The stage whose footprint breaks a tie (after the tag writes when both were sized)."""
    for when, label in _STAGES:
        bucket = _bytes(getattr(pair.bucket.footprint, when))
        row = _bytes(getattr(pair.row.footprint, when))
        if bucket is not None and row is not None:
            return label, bucket, row
    return "", None, None


def _smaller(bucket: Bytes, row: Bytes) -> str:
    """On par in time: the smaller footprint decides (the row layout when unknown)."""
    if bucket is None or row is None:
        return "row"
    return "bucket" if sum(bucket) < sum(row) else "row"


def _why(word: str, mix: stats.Interval | None, choice: str, stage: str) -> str:
    decides = f"the smaller footprint {stage} decides" if stage else "the footprint decides"
    if mix is None:
        return f"No workload of the traffic's mix ran on both layouts: {decides}."
    cost = (
        f"One operation of this traffic's mix (p50s weighted by the mix) costs the bucket "
        f"layout {stats.fmt_interval(mix)} the row layout's (95 % interval)"
    )
    if word in _CHOSEN:
        return f"{cost}: the {choice} layout is faster."
    if word == stats.ON_PAR:
        return f"{cost}: on par, so {decides}."
    return (
        f"{cost}: inconclusive, the interval straddles an edge of the on-par band "
        f"({fmt_num(ON_PAR_LOW, 2)}–{fmt_num(ON_PAR_HIGH, 2)}), so {decides}."
    )


def _unmeasured(results: RunResults, pair: Pair, weights: dict[str, float]) -> list[str]:
    """Every workload of the mix that did not run on both layouts, with why."""
    total = sum(weights.values()) or 1.0
    ran = {w.name for w in results.parameters.workloads}
    missing = []
    for name, weight in weights.items():
        if not weight or (pair.bucket.p50(name) and pair.row.p50(name)):
            continue
        share = f"{fmt_num(100 * weight / total, 0)} % of the mix"
        missing.append(f"{name} ({share}): {_why_not(results, pair, name, ran)}")
    if not missing:
        return []
    return [f"Not in this answer: {'; '.join(missing)}."]


def _why_not(results: RunResults, pair: Pair, name: str, ran: set[str]) -> str:
    if name not in ran:
        largest = results.parameters.dataset.largest_conversation
        if name == "pull_range" and largest < PULL_RANGE_ITEMS:
            return (
                f"it needs a conversation of at least {PULL_RANGE_ITEMS} messages and the "
                f"largest holds {largest:,}"
            )
        return "not among the run's workloads"
    for backend in (pair.bucket, pair.row):
        run = backend.workloads.get(name)
        if run is None:
            return f"{backend.label} did not run it"
        if not run.ops:
            return f"every operation failed on {backend.label} ({run.errors:,} errors)"
    return "no latency was recorded"


def _listed(pair: Pair, names: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{title} {stats.fmt_interval(pair.interval(name))}" for name, title in names)


def _wins(pair: Pair, titles: dict[str, str]) -> list[str]:
    by_word: dict[str, list[tuple[str, str]]] = {}
    for name, title in titles.items():
        if pair.ratio(name) is not None:
            by_word.setdefault(pair.verdict(name), []).append((name, title))
    said = []
    for word, who in ((stats.FASTER, "bucket"), (stats.SLOWER, "row")):
        found = by_word.get(word, [])
        if found:
            said.append(f"The {who} layout wins {_listed(pair, found)} (bucket/row).")
        else:
            said.append(f"The {who} layout wins no workload beyond the on-par band.")
    even = [t for _, t in by_word.get(stats.ON_PAR, [])]
    unsure = [t for _, t in by_word.get(stats.INCONCLUSIVE, [])]
    if even:
        said.append(f"On par: {', '.join(even)}.")
    if unsure:
        said.append(f"Inconclusive (the interval straddles the band): {', '.join(unsure)}.")
    return said


def _storage(pair: Pair, stage: str) -> str:
    """Bytes per message at each sized stage, and which stage broke a tie."""
    said = []
    for when, label in _STAGES[::-1]:
        bucket = _bytes(getattr(pair.bucket.footprint, when))
        row = _bytes(getattr(pair.row.footprint, when))
        if bucket is None or row is None:
            continue
        said.append(
            f"{label} the bucket layout {fmt_num(sum(bucket), 0)} B per message "
            f"({fmt_num(bucket[0], 0)} data + {fmt_num(bucket[1], 2)} index) vs "
            f"{fmt_num(sum(row), 0)} B ({fmt_num(row[0], 0)} + {fmt_num(row[1], 2)}) for rows"
        )
    if not said:
        return "The footprint was not sized."
    text = "Storage " + "; ".join(said) + "."
    if len(said) > 1:
        text += f" A tie in time is broken by the bytes {stage}, the steady state."
    return text


def pages_per_op(result: WorkloadResult | None) -> float | None:
    """Pages the engine touched per operation, when the results carry such a count."""
    if result is None:
        return None
    for name in ("pages_per_op", "pages"):
        value = getattr(result, name, None)
        value = getattr(value, "per_op", value)
        if isinstance(value, int | float):
            return float(value)
    return None


def _pages(pair: Pair, weights: dict[str, float]) -> list[str]:
    names = [n for n, w in weights.items() if w]
    counts = [
        (w, pages_per_op(pair.bucket.workloads.get(n)), pages_per_op(pair.row.workloads.get(n)))
        for n, w in zip(names, (weights[n] for n in names), strict=True)
    ]
    known = [(w, b, r) for w, b, r in counts if b is not None and r is not None]
    if not known:
        return []
    total = sum(w for w, _, _ in known)
    bucket = sum(w * (b or 0) for w, b, _ in known) / total
    row = sum(w * (r or 0) for w, _, r in known) / total
    return [
        f"Pages per operation of the mix: {fmt_num(bucket, 1)} (bucket) vs {fmt_num(row, 1)} (row)."
    ]


def _contention(pair: Pair) -> list[str]:
    """The largest worker count both layouts ran to completion; cut-short runs named apart."""
    best: list[str] = []
    cut: list[str] = []
    for scenario in ("hot_group", "many_groups"):
        b = concurrency.runs(pair.bucket, scenario, "threads")
        r = concurrency.runs(pair.row, scenario, "threads")
        title = concurrency.SCENARIO_TITLES[scenario]
        common = sorted(set(b) & set(r))
        for n in common:
            for layout, run in (("bucket", b[n]), ("row", r[n])):
                if run.ops < run.planned:
                    cut.append(f"{title} at {n} threads ({layout}, {run.ops}/{run.planned} done)")
        whole = [n for n in common if _complete(b[n]) and _complete(r[n])]
        if not whole:
            continue
        n = whole[-1]
        best.append(
            f"{title} at {n} threads: {fmt_num(b[n].ops_per_s, 0)} ops/s (bucket) vs "
            f"{fmt_num(r[n].ops_per_s, 0)} (row)"
        )
    said = []
    if best:
        said.append(
            "Under contention (completed operations ÷ wall time, runs that finished): "
            f"{'; '.join(best)}."
        )
    if cut:
        said.append(f"Left out of this answer, cut short by their deadline: {'; '.join(cut)}.")
    return said


def _complete(run: ContentionRun) -> bool:
    return run.ops >= run.planned


def _depends(results: RunResults, pair: Pair, weights: dict[str, float], others: list[Pair]) -> str:
    said = []
    for other in others:
        if other.row is pair.row:
            mix = stats.mix_interval(other.bucket, other.row, weights)
            _, size, _ = _deciding_bytes(other)
            bytes_text = "" if size is None else f", {fmt_num(sum(size), 0)} B per message"
            timed = "" if other.bucket.p50("ingest") else ", its ingest not timed (bulk-loaded)"
            said.append(
                f"the encoding ({other.bucket.encoding}: {stats.fmt_interval(mix)} the row "
                f"layout's cost{timed}{bytes_text})"
            )
    found = [s for s in sweep.series(results) if pair.bucket in s.buckets]
    if found:
        said.append(f"the bucket size (swept over {', '.join(map(str, found[0].sizes))})")
    else:
        slots = pair.bucket.bucket_size or 100
        said.append(f"the bucket size ({slots} slots here; --bucket-size sweeps it)")
    scale = results.parameters.scale
    said.append(
        f"the scale ({scale}: the data fits in the engine's cache, where buckets' fewer pages "
        "matter less than on a working set larger than memory)"
    )
    return "The verdict depends on " + "; ".join(said) + "."
