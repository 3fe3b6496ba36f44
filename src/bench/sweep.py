"""What a bucket-size sweep says: per engine, each workload against bucket size, and a reading.

Pure functions of ``RunResults`` whose backends carry ``bucket_size``: the same bucket
backend run at several sizes, next to the row backend of the same engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from imbucket.app.registry import REGISTRY
from imbucket.bench.defaults import FLAT
from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.results import BackendResult, Footprint, RunResults, SweepReading
from imbucket.bench.traffic import Traffic


@dataclass(frozen=True, slots=True)
class Series:
    """One bucket backend at several sizes (ascending), and the row backend of its engine."""

    name: str
    sizes: tuple[int, ...]
    buckets: tuple[BackendResult, ...]
    row: BackendResult | None


def series(results: RunResults) -> list[Series]:
    """Every bucket backend that ran at two sizes or more, in run order."""
    found: dict[tuple[tuple[str, str, str], str | None], list[BackendResult]] = {}
    rows: dict[tuple[str, str, str], BackendResult] = {}
    for b in results.ok_backends():
        if b.layout == "row":
            rows.setdefault(b.engine_key, b)
        elif b.bucket_size is not None:
            # each encoding is a series of its own: its sizes, its best size
            found.setdefault((b.engine_key, b.encoding), []).append(b)
    encodings = {key: {e for k, e in found if k == key} for key, _ in found}
    out = []
    for (key, _), members in found.items():
        members.sort(key=lambda b: b.bucket_size or 0)
        if len(members) < 2:
            continue
        family, engine, cache = key
        name = family if family == "memory" else f"{family}/{engine}"
        name += "" if cache == "none" else f"+{cache}"
        if len(encodings[key]) > 1:
            name += f" [{encoding_of(members[0])}]"
        sizes = tuple(b.bucket_size or 0 for b in members)
        out.append(Series(name, sizes, tuple(members), rows.get(key)))
    return out


def encoding_of(bucket: BackendResult) -> str:
    """The bucket encoding a backend wrote: the one asked for, else its store's default."""
    return bucket.encoding or REGISTRY.get(bucket.store).rules.default_encoding


def mix(results: RunResults) -> dict[str, float]:
    """The operation mix of the run's traffic (the built-in one unless a traffic was given)."""
    return (results.parameters.traffic or Traffic()).weights()


def weighted(backend: BackendResult, weights: dict[str, float], names: list[str]) -> float | None:
    """Mean p50 of one operation of the mix, in µs (the mix's weights over names)."""
    total = sum(weights.get(n, 0.0) for n in names)
    if not total:
        return None
    cost = 0.0
    for name in names:
        value = backend.p50(name)
        if value is None:
            return None
        cost += weights.get(name, 0.0) * value
    return cost / total


def common_workloads(s: Series, weights: dict[str, float]) -> list[str]:
    """Workloads of the mix that ran at every size of the series."""
    names = [n for n, w in weights.items() if w > 0]
    return [n for n in names if all(b.p50(n) is not None for b in s.buckets)]


def costs(s: Series, weights: dict[str, float]) -> list[float | None]:
    """The weighted mean operation p50 at each size."""
    names = common_workloads(s, weights)
    return [weighted(b, weights, names) for b in s.buckets]


def bend(sizes: tuple[int, ...], values: list[float]) -> int | None:
    """The smallest size beyond which bigger buckets lower the cost by less than FLAT in all.

    None when that is the largest size: the cost was still falling at the end of the sweep.
    """
    for k in range(len(sizes)):
        if values[k] <= min(values[k:]) * (1 + FLAT):
            return None if k == len(sizes) - 1 and k > 0 else sizes[k]
    return None


def _bytes(backend: BackendResult) -> float | None:
    f = backend.footprint.measured()
    return None if f is None else f.data_bytes_per_message + f.index_bytes_per_message


def best(s: Series, values: list[float]) -> tuple[int, list[int]]:
    """The size with the lowest cost, and every size within FLAT of it.

    Among near-equal sizes the one storing the fewest bytes per message wins.
    """
    lowest = min(values)
    near = [size for size, v in zip(s.sizes, values, strict=True) if v <= lowest * (1 + FLAT)]
    by_size = dict(zip(s.sizes, s.buckets, strict=True))
    smallest = min(near, key=lambda size: (_bytes(by_size[size]) or 0.0, size))
    return smallest, near


def reading(s: Series, weights: dict[str, float], titles: dict[str, str]) -> str:
    """One paragraph: where the curve bends, which size is best for this traffic and why."""
    found = costs(s, weights)
    if any(v is None for v in found):
        return f"On {s.name} not every size ran the workloads of the mix; no reading."
    values = [v for v in found if v is not None]
    chosen, near = best(s, values)
    knee = bend(s.sizes, values)
    low, high = s.sizes[0], s.sizes[-1]
    parts = [
        f"On {s.name}, one operation of this traffic's mix takes {fmt_us(values[0])} (p50, "
        f"weighted) at {low} slots per bucket and {fmt_us(values[-1])} at {high}."
    ]
    parts.append(_bend_text(s.sizes, values, knee))
    others = [size for size in near if size != chosen]
    parts.append(
        f"Best for this traffic: {chosen}"
        + (f" (on par within 5 %: {', '.join(map(str, others))}; {chosen} stores the fewest "
           "bytes of those)" if others else "")
        + "."
    )  # fmt: skip
    row = row_cost(s, weights)
    if row:
        at = values[s.sizes.index(chosen)]
        verdict = f"{row / at:.2f}× faster" if at < row else f"{at / row:.2f}× slower"
        parts.append(
            f"The row layout takes {fmt_us(row)} for the same mix: buckets of {chosen} are "
            f"{verdict}."
        )
    parts += _why(s, weights, titles)
    parts += _storage(s, chosen)
    return " ".join(parts)


def _bend_text(sizes: tuple[int, ...], values: list[float], knee: int | None) -> str:
    low, high = sizes[0], sizes[-1]
    if knee is None:
        return f"The cost keeps falling up to {high}: the curve has not bent within the sweep."
    at = sizes.index(knee)
    after = values[-1] / values[at] - 1
    tail = f"{after:+.0%} at {high}" if knee != high else ""
    if at == 0:
        return (
            f"Bigger buckets do not pay here: above {low} the cost never falls by 5 % or "
            f"more ({tail})."
        )
    saved = 1 - values[at] / values[0]
    return (
        f"The curve bends at {knee}: up to it bigger buckets cut the cost by {saved:.0%}, "
        f"beyond it by under 5 % in all ({tail})."
    )


def _why(s: Series, weights: dict[str, float], titles: dict[str, str]) -> list[str]:
    """The workloads that move the weighted cost most between the smallest and largest size."""
    first, last = s.buckets[0], s.buckets[-1]
    moves = []
    for name in common_workloads(s, weights):
        a, b = first.p50(name), last.p50(name)
        if a and b:
            moves.append((weights[name] * abs(b - a), name, b / a))
    moves.sort(reverse=True)
    said = []
    for _, name, factor in moves[:2]:
        if abs(factor - 1) < 0.1:
            continue
        way = f"{factor:.1f}× slower" if factor > 1 else f"{1 / factor:.1f}× faster"
        before, after = first.trips(name), last.trips(name)
        rt = (
            f"{fmt_num(before)} → {fmt_num(after)} round trips"
            if before != after
            else f"{fmt_num(before)} round trips at both: the work per round trip"
        )
        share = weights[name] / sum(weights.values())
        said.append(
            f"{titles.get(name, name)} ({share:.0%} of operations) gets {way} from "
            f"{s.sizes[0]} to {s.sizes[-1]} ({rt})"
        )
    return [("Why: " + "; ".join(said) + ".")] if said else []


def _storage(s: Series, chosen: int) -> list[str]:
    first, last = s.buckets[0].footprint.measured(), s.buckets[-1].footprint.measured()
    if first is None or last is None:
        return []
    text = (
        f"Storage: data bytes per message go from {fmt_num(first.data_bytes_per_message, 0)} "
        f"to {fmt_num(last.data_bytes_per_message, 0)} and index bytes from "
        f"{fmt_num(first.index_bytes_per_message)} to "
        f"{fmt_num(last.index_bytes_per_message)} ({fmt_num(first.messages_per_document, 1)}"
        f" → {fmt_num(last.messages_per_document, 1)} messages per bucket)"
    )
    row = s.row.footprint.measured() if s.row else None
    if row is not None:
        text += (
            f"; the row layout stores {fmt_num(row.data_bytes_per_message, 0)} + "
            f"{fmt_num(row.index_bytes_per_message)} bytes"
        )
    return [text + "."]


def row_cost(s: Series, weights: dict[str, float]) -> float | None:
    """The weighted mean operation p50 of the row layout, on the workloads of the series."""
    if s.row is None:
        return None
    return weighted(s.row, weights, common_workloads(s, weights))


def footprints(s: Series) -> list[Footprint | None]:
    """Footprint after ingest of the row layout (when it ran) and of each size."""
    backends = ([s.row] if s.row else []) + list(s.buckets)
    return [b.footprint.measured() for b in backends]


def analysis(results: RunResults, titles: dict[str, str]) -> list[SweepReading]:
    """The reading of each engine of the sweep (stored in results.json)."""
    weights = mix(results)
    out = []
    for s in series(results):
        values = costs(s, weights)
        out.append(
            SweepReading(
                engine=s.name,
                sizes=list(s.sizes),
                weighted_p50_us=[_rounded(v) for v in values],
                row_weighted_p50_us=_rounded(row_cost(s, weights)),
                reading=reading(s, weights, titles),
            )
        )
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
