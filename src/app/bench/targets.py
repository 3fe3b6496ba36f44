"""The project's acceptance targets, measured on one run (pass/FAIL lines, never asserted).

pull_latest within two round trips, clear_history one write at a flat cost, the service
within 1.5× of a raw driver query, sql-bucket's index a twentieth of sql-row's, and
``make bench`` within three minutes on the embedded default.
"""

from __future__ import annotations

from app.bench.analysis import nearest_default, pairs, ratio
from app.bench.defaults import DEFAULT_LABELS, MAKE_BENCH_BUDGET_S
from app.bench.formatting import fmt_num, fmt_ratio, fmt_us
from app.bench.results import BackendResult, RunResults, TargetLine

LATEST_MAX_TRIPS = 2  # pull_latest(20): the watermarks and one read
CLEAR_GROWTH_MAX = 1.5  # clear_history p50 on the largest conversation vs a small one
OVERHEAD_MAX = 1.5  # service pull_latest p50 vs the raw driver query
INDEX_SHARE_MAX = 1 / 20  # sql-bucket index bytes per message vs sql-row's

_LATEST = f"pull_latest(20) ≤ {LATEST_MAX_TRIPS} round trips"
_OVERHEAD = f"service overhead ≤ {OVERHEAD_MAX}× raw driver"
_INDEX = f"sql-bucket index bytes/msg ≤ 1/{1 / INDEX_SHARE_MAX:.0f} of sql-row"
_DURATION = "make bench < 3 min on 2 cores"


def targets(results: RunResults) -> list[TargetLine]:
    """The project's targets, measured on this run."""
    every = results.ok_backends()
    # In a sweep the size nearest OpenIM's 100 stands for each bucket backend.
    backends = [b for b in every if nearest_default(b, every)]
    found: list[TargetLine] = []
    found += _latest_targets(backends)
    found += _clear_targets(backends)
    found += _overhead_targets(backends)
    found += _index_targets(results)
    found.append(_duration_target(results))
    return found


def _latest_targets(backends: list[BackendResult]) -> list[TargetLine]:
    found = []
    for b in backends:
        run = b.workloads.get("pull_latest")
        if run is None:
            continue
        rt = run.round_trips
        cached = b.cache != "none"
        value = rt.typical if cached else rt.max
        note = f"cache misses take up to {rt.max}" if cached and rt.max > value else None
        measured = f"{'typical' if cached else 'max'} {value} round trips"
        found.append(TargetLine(_LATEST, b.label, measured, value <= LATEST_MAX_TRIPS, note))
    if not found:
        found.append(TargetLine(_LATEST, "–", "not run", None))
    return found


def _clear_targets(backends: list[BackendResult]) -> list[TargetLine]:
    found = []
    for b in backends:
        small, large = b.workloads.get("clear_small"), b.workloads.get("clear_largest")
        if small is None or large is None:
            continue
        writes = {small.round_trips.writes_per_op, large.round_trips.writes_per_op}
        same_trips = small.round_trips.per_op == large.round_trips.per_op
        growth = ratio(b.p50("clear_largest"), b.p50("clear_small"))
        flat = growth is not None and growth <= CLEAR_GROWTH_MAX
        measured = (
            f"writes/op {', '.join(fmt_num(w) for w in sorted(writes))}; round trips "
            f"{fmt_num(small.round_trips.per_op)} vs "
            f"{fmt_num(large.round_trips.per_op)}; "
            f"p50 largest/small {fmt_ratio(growth)}"
        )
        found.append(
            TargetLine(
                "clear_history: one write, flat cost",
                b.label,
                measured,
                writes == {1.0} and same_trips and flat,
                f"flat = p50 on the largest within {CLEAR_GROWTH_MAX}× of a ≤100-message "
                "conversation",
            )
        )
    return found


def _overhead_targets(backends: list[BackendResult]) -> list[TargetLine]:
    found = []
    for b in backends:
        value = ratio(b.p50("pull_latest"), b.p50("raw_pull_latest"))
        if value is None:
            continue
        found.append(
            TargetLine(
                _OVERHEAD,
                b.label,
                f"pull_latest(20) p50 {fmt_us(b.p50('pull_latest'))} vs raw "
                f"{fmt_us(b.p50('raw_pull_latest'))} = {fmt_ratio(value)}",
                value <= OVERHEAD_MAX,
            )
        )
    if not found:
        found.append(TargetLine(_OVERHEAD, "–", "no uncached sql-row backend", None))
    return found


def _index_targets(results: RunResults) -> list[TargetLine]:
    found = []
    for pair in pairs(results):
        if pair.bucket.family != "sql" or pair.bucket.cache != "none":
            continue
        bucket, row = pair.bucket.footprint.measured(), pair.row.footprint.measured()
        b_index = None if bucket is None else bucket.index_bytes_per_message
        r_index = None if row is None else row.index_bytes_per_message
        value = ratio(b_index, r_index)
        share = "–" if value is None else f"1/{1 / value:.0f}" if value else "0"
        found.append(
            TargetLine(
                _INDEX,
                pair.engine,
                f"{fmt_num(b_index)} vs {fmt_num(r_index)} B/msg = {share}",
                None if value is None else value <= INDEX_SHARE_MAX,
            )
        )
    if not found:
        found.append(TargetLine(_INDEX, "–", "no SQL pair", None))
    return found


def _duration_target(results: RunResults) -> TargetLine:
    labels = tuple(b.label for b in results.backends)
    default = labels == DEFAULT_LABELS and results.parameters.scale == "small"
    measured = f"{results.duration_s:.0f} s on {results.machine.cpu_count} cores"
    if not default:
        return TargetLine(_DURATION, "this run", measured, None, "not the default")
    return TargetLine(
        _DURATION,
        "embedded default",
        measured,
        results.duration_s < MAKE_BENCH_BUDGET_S,
        "bench run only; a fresh clone adds the .venv install",
    )
