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
from imbucket.bench.formatting import fmt_num
from imbucket.bench.results import BackendResult, Footprint, RunResults, WorkloadResult

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
    bucket_bytes, row_bytes = _bytes(pair.bucket), _bytes(pair.row)
    choice = _CHOSEN.get(word) or _leaning(mix) or _smaller(bucket_bytes, row_bytes)
    why = _why(word, mix, choice)
    parts = [f"{pair.name}: choose the {choice} layout for this traffic. {why}"]
    parts += _wins(pair, titles)
    parts += [_storage(bucket_bytes, row_bytes)]
    parts += _pages(pair, weights)
    parts += _contention(pair)
    parts.append(_depends(results, pair, weights, others))
    return " ".join(p for p in parts if p)


Bytes = tuple[float, float] | None  # data and index bytes per message after ingest


def _bytes(backend: BackendResult) -> Bytes:
    found = backend.footprint.measured()
    if not isinstance(found, Footprint):
        return None
    return found.data_bytes_per_message, found.index_bytes_per_message


def _leaning(mix: stats.Interval | None) -> str | None:
    """Inconclusive against the band but clear of 1: the faster side, else None."""
    if mix is None or stats.verdict(mix) != stats.INCONCLUSIVE:
        return None
    return "bucket" if mix.high < 1 else "row" if mix.low > 1 else None


def _smaller(bucket: Bytes, row: Bytes) -> str:
    """On par in time: the smaller footprint decides (the row layout when unknown)."""
    if bucket is None or row is None:
        return "row"
    return "bucket" if sum(bucket) < sum(row) else "row"


def _why(word: str, mix: stats.Interval | None, choice: str) -> str:
    if mix is None:
        return "No workload of the traffic's mix ran on both layouts: the footprint decides."
    cost = (
        f"One operation of this traffic's mix (p50s weighted by the mix) costs the bucket "
        f"layout {stats.fmt_interval(mix)} the row layout's (95 % interval)"
    )
    if word in _CHOSEN:
        return f"{cost}: the {choice} layout is faster."
    if _leaning(mix):
        return (
            f"{cost}: the {choice} layout is faster, though perhaps by less than the on-par "
            "band (inconclusive against it)."
        )
    kind = "on par" if word == stats.ON_PAR else "too close to call (inconclusive)"
    return f"{cost}: {kind}, so the smaller footprint decides."


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


def _storage(bucket: Bytes, row: Bytes) -> str:
    if bucket is None or row is None:
        return "The footprint was not sized."
    return (
        f"Storage after ingest: the bucket layout {fmt_num(sum(bucket), 0)} B per message "
        f"({fmt_num(bucket[0], 0)} data + {fmt_num(bucket[1], 2)} index) vs "
        f"{fmt_num(sum(row), 0)} B ({fmt_num(row[0], 0)} + {fmt_num(row[1], 2)}) for rows."
    )


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
    best: list[str] = []
    for scenario in ("hot_group", "many_groups"):
        b = concurrency.runs(pair.bucket, scenario, "threads")
        r = concurrency.runs(pair.row, scenario, "threads")
        common = sorted(set(b) & set(r))
        if not common:
            continue
        n = common[-1]
        title = concurrency.SCENARIO_TITLES[scenario]
        best.append(
            f"{title} at {n} threads: {fmt_num(b[n].ops_per_s, 0)} ops/s (bucket, "
            f"{b[n].ops}/{b[n].planned} done) vs {fmt_num(r[n].ops_per_s, 0)} "
            f"({r[n].ops}/{r[n].planned})"
        )
    if not best:
        return []
    return [f"Under contention (completed operations ÷ wall time): {'; '.join(best)}."]


def _depends(results: RunResults, pair: Pair, weights: dict[str, float], others: list[Pair]) -> str:
    said = []
    for other in others:
        if other.row is pair.row:
            mix = stats.mix_interval(other.bucket, other.row, weights)
            size = _bytes(other.bucket)
            bytes_text = "" if size is None else f", {fmt_num(sum(size), 0)} B per message"
            said.append(
                f"the encoding ({other.bucket.encoding}: {stats.fmt_interval(mix)} the row "
                f"layout's cost{bytes_text})"
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
