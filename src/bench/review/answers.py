"""The memo's first screen: one line per engine and regime, read from the review's results.

A verdict word is used only where the evidence allows it: in memory, the interval of one
operation of the mix against the on-par band (the report's rule); out of memory and at scale,
where one pass gives no interval, the word rests on pages per operation (a count) and the
latency ratio is given as a point; a regime cut short says so on its line.
"""

from __future__ import annotations

from collections.abc import Mapping

from imbucket.bench import stats
from imbucket.bench.analysis import Pair, pairs
from imbucket.bench.capacity import PAGE_BYTES, PULLS
from imbucket.bench.defaults import ON_PAR_HIGH, ON_PAR_LOW
from imbucket.bench.formatting import fmt_num
from imbucket.bench.memory_budget import CLUSTERED_ROWS, Pass
from imbucket.bench.results import Footprint
from imbucket.bench.review.budget import TITLES
from imbucket.bench.review.model import Review
from imbucket.bench.scale import Point
from imbucket.bench.traffic import Traffic

Answer = tuple[str, str, str]  # engine, regime, the line
_WORD = {stats.FASTER: "buckets faster", stats.SLOWER: "rows faster"}


def weights(review: Review) -> dict[str, float]:
    """The traffic's operation mix (the default one unless a profile was given)."""
    found = review.in_memory
    traffic = found.parameters.traffic if found is not None else None
    return (traffic or Traffic()).weights()


def engines(review: Review) -> list[str]:
    """The engines the review covers, by the names its results use, in the order asked."""
    return list(review.engines)


def lines(review: Review) -> list[Answer]:
    """Every engine's answer in each regime, the capacity plan last."""
    found: list[Answer] = []
    for engine in engines(review):
        found += [
            (engine, "in_memory", in_memory(review, engine)),
            (engine, "out_of_memory", out_of_memory(review, engine)),
            (engine, "growth", at_scale(review, engine)),
            (engine, "contention", contention(review, engine)),
            (engine, "capacity", capacity(review, engine)),
        ]
    return found


def _cut(review: Review, regime: str, engine: str) -> str:
    run = review.regimes.get(regime)
    if run is None or not run.was_cut:
        return ""
    mine = [c for c in run.cut_short if engine in c or "/" not in c]
    return " [cut short: its time share ran out; see threats]" if mine else ""


def _pair(review: Review, engine: str) -> Pair | None:
    if review.in_memory is None:
        return None
    return next((p for p in pairs(review.in_memory) if p.engine == engine), None)


def _end_bytes(footprints: object) -> float | None:
    for name in ("end", "after_ingest"):
        found = getattr(footprints, name, None)
        if isinstance(found, Footprint):
            return found.data_bytes_per_message + found.index_bytes_per_message
    return None


def in_memory(review: Review, engine: str) -> str:
    """Cost of one operation of the mix, bucket/row, with its interval and verdict word."""
    pair = _pair(review, engine)
    if pair is None:
        return "not measured (no bucket/row pair ran)" + _cut(review, "in_memory", engine)
    mix = stats.mix_interval(pair.bucket, pair.row, weights(review))
    word = stats.verdict(mix)
    said = _WORD.get(word) or (
        "on par" if word == stats.ON_PAR else "too close to call (the interval straddles the band)"
    )
    bucket, row = _end_bytes(pair.bucket.footprint), _end_bytes(pair.row.footprint)
    size = (
        ""
        if bucket is None or row is None
        else f"; after the tag writes {fmt_num(bucket, 0)} vs {fmt_num(row, 0)} B/msg"
    )
    scale = review.in_memory.parameters.scale if review.in_memory else "?"
    return (
        f"{said}: one operation of the mix costs buckets {stats.fmt_interval(mix)} the rows' "
        f"(95 % interval, scale {scale}, data in cache){size}" + _cut(review, "in_memory", engine)
    )


def _mixed(values: Mapping[str, float], mix: Mapping[str, float]) -> tuple[float | None, list[str]]:
    names = [n for n in values if mix.get(n)]
    total = sum(mix[n] for n in names)
    if not total:
        return None, []
    return sum(mix[n] * values[n] for n in names) / total, names


def _ratio_text(bucket: float | None, row: float | None) -> str:
    if bucket is None or row is None or row <= 0:
        return "–"
    return f"{bucket / row:.2f}×"


def _pages_word(bucket: float | None, row: float | None, what: str) -> str:
    if bucket is None or row is None:
        return f"{what}: not counted"
    if row <= 0 or bucket <= 0:
        return f"{what} {fmt_num(bucket, 1)} (bucket) vs {fmt_num(row, 1)} (row)"
    ratio = bucket / row
    counts = f"{fmt_num(bucket, 1)} (bucket) vs {fmt_num(row, 1)} (row)"
    return f"{_word(ratio)}: {what} {counts}, {ratio:.2f}×"


def _word(ratio: float) -> str:
    """The pages word for a bucket/row ratio of pages per operation (a count: no interval)."""
    if ratio < ON_PAR_LOW:
        return "buckets need fewer pages"
    return "rows need fewer pages" if ratio > ON_PAR_HIGH else "pages on par"


def _clustered(
    bucket: float | None, row: float | None, clustered: float | None, worse_in: str = ""
) -> str:
    """Whether PostgreSQL's rows clustered by (conversation, seq) change the pages word.

    worse_in names the workload where the clustered rows read the most pages more than the
    rows, said when the clustered figure is the higher one.
    """
    if bucket is None or row is None or clustered is None or min(bucket, row, clustered) <= 0:
        return ""
    before, after = _word(bucket / row), _word(bucket / clustered)
    verdict = "the same answer" if before == after else f"it changes the answer: {after}"
    return (
        f"; rows clustered by (conversation, seq): {fmt_num(clustered, 1)}"
        f"{_why_more(worse_in) if clustered > row and worse_in else ''}, bucket/clustered "
        f"{bucket / clustered:.2f}×, {verdict}"
    )


def _why_more(workload: str) -> str:
    """Where clustered rows read more pages than the rows."""
    return f" (more than the rows' in {workload})"


def _worse_in(row: Mapping[str, Pass], clustered: Mapping[str, Pass]) -> str:
    """The workload where clustered reads the most pages per op more than row cold, or ''."""
    extra = {
        name: found.read_per_op - row[name].read_per_op
        for name, found in clustered.items()
        if name in row and found.ops and row[name].ops
    }
    worst = max(extra, key=lambda name: extra[name], default="")
    return worst if worst and extra[worst] > 0 else ""


def _passes(passes: Mapping[str, Pass], mix: Mapping[str, float]) -> tuple[float | None, ...]:
    pages, _ = _mixed({n: p.read_per_op for n, p in passes.items() if p.ops}, mix)
    touched, _ = _mixed({n: p.touched_per_op for n, p in passes.items() if p.ops}, mix)
    p50, _ = _mixed({n: float(p.p50_us) for n, p in passes.items() if p.ops}, mix)
    return pages, touched, p50


def out_of_memory(review: Review, engine: str) -> str:
    """Cold pages read per operation of the mix (the word) and cold p50 (a point)."""
    found = review.out_of_memory
    run = next((e for e in found.engines if e.engine == engine), None) if found else None
    cut = _cut(review, "out_of_memory", engine)
    if run is None or run.reason:
        why = run.reason if run is not None and run.reason else "not measured"
        return f"not measured ({why})" + cut
    by = {layout.store: _passes(layout.cold, weights(review)) for layout in run.layouts}
    bucket, row = by.get("sql-bucket"), by.get("sql-row")
    if bucket is None or row is None:
        return "not measured (a layout is missing)" + cut
    share = run.buffer_bytes / max(run.dataset_bytes, 1)
    clustered = by.get(CLUSTERED_ROWS)
    passes = {layout.store: layout.cold for layout in run.layouts}
    worse_in = _worse_in(passes["sql-row"], passes.get(CLUSTERED_ROWS, {}))
    ordered = _clustered(bucket[0], row[0], clustered[0] if clustered else None, worse_in)
    return (
        f"{_pages_word(bucket[0], row[0], 'read per op cold')}{ordered}; cold p50 bucket/row "
        f"{_ratio_text(bucket[2], row[2])} (one pass, no interval; buffer "
        f"{share:.0%} of the rows' bytes, {found.messages if found else 0:,} messages)" + cut
    )


def _series(review: Review, engine: str) -> dict[str, list[Point]]:
    found: dict[str, list[Point]] = {}
    for point in review.growth.points if review.growth else ():
        if point.engine == engine:
            found.setdefault(point.store, []).append(point)
    return found


def at_scale(review: Review, engine: str) -> str:
    """At the largest size: pages touched per operation of the mix, and how they grew."""
    series = _series(review, engine)
    cut = _cut(review, "growth", engine)
    bucket, row = series.get("sql-bucket", []), series.get("sql-row", [])
    sizes = sorted({p.messages for p in bucket} & {p.messages for p in row})
    if len(sizes) < 2:
        return f"not measured at two sizes ({len(sizes)} size(s) ran)" + cut
    mix = weights(review)
    last = [next(p for p in s if p.messages == sizes[-1]) for s in (bucket, row)]
    first = [next(p for p in s if p.messages == sizes[0]) for s in (bucket, row)]
    now = [_passes(p.passes, mix) for p in last]
    then = [_passes(p.passes, mix) for p in first]
    growth = [_ratio_text(a[1], b[1]).replace("×", "") for a, b in zip(now, then, strict=True)]
    clustered = [p for p in series.get(CLUSTERED_ROWS, []) if p.messages == sizes[-1]]
    ordered = _passes(clustered[0].passes, mix)[1] if clustered else None
    return (
        f"at {sizes[-1]:,} messages {_pages_word(now[0][1], now[1][1], 'touched per op')}"
        f"{_clustered(now[0][1], now[1][1], ordered)}; "
        f"p50 bucket/row {_ratio_text(now[0][2], now[1][2])} (one warm pass); pages per op "
        f"over {sizes[-1] / sizes[0]:,.0f}× the messages: ×{growth[0]} (bucket), ×{growth[1]} "
        "(row)" + cut
    )


def _layout(store: str) -> str:
    """``sql-bucket`` for every bucket store (mongo-bucket too), ``sql-row`` for rows."""
    return "sql-row" if store.endswith("-row") else "sql-bucket"


def contention(review: Review, engine: str) -> str:
    """The hot group at its most threads: completed ops/s of each layout, or why not quoted."""
    runs = {_layout(c.store): c.runs for c in review.contention if c.engine == engine}
    cut = _cut(review, "contention", engine)
    picked = {}
    for store, found in runs.items():
        hot = [r for r in found if r.scenario == "hot_group" and r.mode == "threads"]
        if hot:
            picked[store] = max(hot, key=lambda r: r.workers)
    bucket, row = picked.get("sql-bucket"), picked.get("sql-row")
    if bucket is None or row is None:
        return "not measured" + cut
    unfinished = [f"{r.ops}/{r.planned}" for r in (bucket, row) if r.ops < r.planned]
    if unfinished:
        return (
            f"not quoted: the hot group at {bucket.workers} threads did not finish "
            f"({', '.join(unfinished)} done)" + cut
        )
    return (
        f"one hot group at {bucket.workers} threads, run to completion: "
        f"{fmt_num(bucket.ops_per_s, 0)} ops/s (bucket) vs {fmt_num(row.ops_per_s, 0)} (row), "
        f"{_ratio_text(bucket.ops_per_s, row.ops_per_s)}" + cut
    )


def _rates(mix: Mapping[str, float], pulls_per_s: float) -> dict[str, float]:
    pulls = sum(mix.get(n, 0.0) for n in PULLS)
    return {n: pulls_per_s * w / pulls for n, w in mix.items() if w > 0} if pulls else {}


def plan_need(review: Review, point: Point) -> tuple[float, float, float, list[str]]:
    """Disk, RAM for indexes and pages touched/s at the target, from one growth point."""
    rates = _rates(weights(review), review.pulls_per_s)
    pages = sum(r * point.passes[n].touched_per_op for n, r in rates.items() if n in point.passes)
    missing = [n for n in rates if n not in point.passes]
    disk = review.target_messages * (point.data_bytes_per_message + point.index_bytes_per_message)
    return disk, review.target_messages * point.index_bytes_per_message, pages, missing


def fmt_bytes(value: float) -> str:
    """E.g. ``1.2 TB``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{fmt_num(value / size, 1)} {unit}"
    return f"{fmt_num(value, 0)} B"


def capacity(review: Review, engine: str) -> str:
    """The target's disk, index RAM and pages/s per layout, from the largest size measured."""
    series = _series(review, engine)
    if not series.get("sql-bucket") or not series.get("sql-row"):
        return "not projected (no growth point to project from)"
    said = []
    for store in ("sql-bucket", "sql-row"):
        point = series[store][-1]
        disk, ram, pages, _ = plan_need(review, point)
        said.append(
            f"{store.split('-')[1]} {fmt_bytes(disk)} disk, {fmt_bytes(ram)} index RAM, "
            f"{fmt_num(pages, 0)} pages/s"
        )
    page = PAGE_BYTES.get(engine)
    unit = f" of {page // 1024} KiB" if page else ""
    return (
        f"{review.target_messages:,} messages at {fmt_num(review.pulls_per_s, 0)} pulls/s: "
        f"{'; '.join(said)}{unit} (a linear projection from {series['sql-row'][-1].messages:,})"
    )


def title(regime: str) -> str:
    """The regime's name on the memo."""
    return TITLES.get(regime, regime)
