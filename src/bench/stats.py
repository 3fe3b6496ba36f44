"""Confidence intervals of latency ratios, and the verdict word each interval earns.

A workload runs in trials: the same operations split into K chunks, every backend running
chunk k before any runs chunk k + 1. The interval of a ratio of medians (bucket p50 / row
p50) comes from a two-level bootstrap: each replicate draws K trials with replacement (the
same trials for both arms, which ran side by side) and, inside each drawn trial, its
operations with replacement. Drawing trials carries the run-to-run noise of a shared machine
(a burst of load hits a trial, not single operations); drawing operations inside them keeps
the interval honest when K is small, where a bootstrap over a handful of trial medians
alone would be too coarse to mean much.

Latencies are read back from the per-trial HdrHistograms in results.json, so an interval is
a pure function of the results and a re-rendered report gives the same one (fixed seed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from hdrh.histogram import HdrHistogram

from imbucket.bench.defaults import ON_PAR_HIGH, ON_PAR_LOW
from imbucket.bench.results import BackendResult, WorkloadResult

CONFIDENCE = 0.95
RESAMPLES = 1000
SEED = 20260101  # fixed: the same results give the same intervals
_CHUNK = 2_000_000  # draws per slice of replicates, to bound memory on long workloads

FASTER, SLOWER, ON_PAR, INCONCLUSIVE = "faster", "slower", "on par", "inconclusive"


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate and its confidence interval."""

    point: float
    low: float
    high: float

    def as_list(self) -> list[float]:
        """[low, high] rounded for results.json."""
        return [round(self.low, 4), round(self.high, 4)]


@lru_cache(maxsize=4096)
def _decode(encoded: str) -> np.ndarray:
    """Every recorded latency of an encoded histogram, each as its bucket's highest value."""
    histogram = HdrHistogram.decode(encoded)
    counts = np.asarray(histogram.counts[: histogram.counts_len], dtype=np.int64)
    used = np.nonzero(counts)[0]  # the histogram's own iterator walks every bucket: slow
    values = [
        histogram.get_highest_equivalent_value(histogram.get_value_from_index(int(i))) for i in used
    ]
    return np.repeat(np.asarray(values, dtype=np.float64), counts[used])


def samples(trials: Sequence[str], whole: str = "") -> list[np.ndarray]:
    """The latencies of each trial (µs), from their encoded histograms.

    Results without trials (an older results.json) count as one trial: the whole histogram.
    """
    found = [_decode(t) for t in trials if t] or ([_decode(whole)] if whole else [])
    return [s for s in found if s.size]


def medians(trials: list[np.ndarray], picks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The median of each replicate: picks[b] names the trials drawn for replicate b.

    Inside a drawn trial, as many operations as its shortest trial holds are drawn with
    replacement (trials differ by at most one operation: the chunks of an even split).
    """
    size = min(t.size for t in trials)
    flat = np.concatenate(trials)
    offsets = np.cumsum([0] + [t.size for t in trials[:-1]])
    lengths = np.asarray([t.size for t in trials])
    out = np.empty(picks.shape[0])
    step = max(1, _CHUNK // max(1, picks.shape[1] * size))
    for start in range(0, picks.shape[0], step):
        chosen = picks[start : start + step]
        draws = rng.random((chosen.shape[0], chosen.shape[1], size))
        index = offsets[chosen][..., None] + (draws * lengths[chosen][..., None]).astype(np.int64)
        out[start : start + step] = np.median(flat[index].reshape(chosen.shape[0], -1), axis=1)
    return out


def replicates(
    a: list[np.ndarray], b: list[np.ndarray], resamples: int = RESAMPLES
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap medians of two arms measured in the same trials, paired by trial.

    When the arms ran a different number of trials the pairing falls back to the shorter.
    """
    rng = np.random.default_rng(SEED)
    k = min(len(a), len(b))
    picks = rng.integers(0, k, size=(resamples, k))
    return medians(a[:k], picks, rng), medians(b[:k], picks, rng)


def interval(point: float, values: np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """Percentile interval of bootstrap values around a point estimate."""
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Interval(point, float(min(low, point)), float(max(high, point)))


def ratio_from(point: float, drawn: tuple[np.ndarray, np.ndarray] | None) -> Interval:
    """The interval of a ratio of medians around point, from its arms' bootstrap medians drawn.

    drawn is ``replicates(a, b)``; None (no latencies kept, as in hand-made results) gives the
    point alone.
    """
    if drawn is None:
        return Interval(point, point, point)
    top, bottom = drawn
    return interval(point, top / np.maximum(bottom, 1.0))


def verdict(found: Interval | None, low: float = ON_PAR_LOW, high: float = ON_PAR_HIGH) -> str:
    """The verdict word of a bucket/row interval.

    faster / slower when the whole interval lies outside the on-par band, on par when it
    lies inside, inconclusive when it straddles a bound of the band. Below the band the
    bucket layout is faster.
    """
    if found is None:
        return INCONCLUSIVE
    if found.high < low:
        return FASTER
    if found.low > high:
        return SLOWER
    if found.low >= low and found.high <= high:
        return ON_PAR
    return INCONCLUSIVE


def judged(found: Interval | None, limit: float) -> bool | None:
    """A time target "ratio ≤ limit", judged on the interval.

    True when even its upper bound meets the limit, False when even its lower bound misses
    it, None (inconclusive) otherwise.
    """
    if found is None:
        return None
    if found.high <= limit:
        return True
    if found.low > limit:
        return False
    return None


def fmt_interval(
    found: Interval | None, edges: tuple[float, ...] = (ON_PAR_LOW, ON_PAR_HIGH)
) -> str:
    """E.g. ``1.21× [1.10–1.34]``.

    A bound that two decimals would print as one of edges (the on-par band's, or a
    target's limit) without being it gets the decimals that tell its side: 1.248 is not
    printed as 1.25 beside a band ending at 1.25, which would contradict its verdict.
    """
    if found is None:
        return "–"
    if found.low == found.high == found.point:
        return f"{found.point:.2f}×"
    low, high = _bound(found.low, edges), _bound(found.high, edges)
    return f"{found.point:.2f}× [{low}–{high}]"


def _bound(value: float, edges: tuple[float, ...]) -> str:
    for decimals in (2, 3, 4):
        shown = round(value, decimals)
        if value in edges or shown not in edges:
            break
    return f"{value:.{decimals}f}"


def _arm(result: WorkloadResult) -> tuple[str, ...]:
    return tuple(result.trials) or (result.histogram,)


@lru_cache(maxsize=1024)
def _replicated(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """Bootstrap medians of two arms given as encoded histograms.

    Cached: the report, its analysis and the console ask for the same intervals.
    """
    first, second = samples(a), samples(b)
    return replicates(first, second) if first and second else None


def between(a: BackendResult, a_name: str, b: BackendResult, b_name: str) -> Interval | None:
    """The interval of p50(a's a_name) / p50(b's b_name), paired by trial; None if not run."""
    top, bottom = a.p50(a_name), b.p50(b_name)
    ra, rb = a.workloads.get(a_name), b.workloads.get(b_name)
    if top is None or not bottom or ra is None or rb is None:
        return None
    return ratio_from(top / bottom, _replicated(_arm(ra), _arm(rb)))


def mix_interval(a: BackendResult, b: BackendResult, weights: dict[str, float]) -> Interval | None:
    """The interval of one operation of a mix on a vs on b: Σ w·p50(a) / Σ w·p50(b).

    Over the workloads of weights both ran; each workload's medians are bootstrapped as in
    ``between``, replicate b of every workload drawing the same trial numbers (the fixed
    seed), which if anything widens the interval.
    """
    names = [n for n, w in weights.items() if w and a.p50(n) and b.p50(n)]
    if not names:
        return None
    drawn = {n: _replicated(_arm(a.workloads[n]), _arm(b.workloads[n])) for n in names}
    kept = [n for n in names if drawn[n] is not None] or names
    point = sum(weights[n] * (a.p50(n) or 0.0) for n in kept) / sum(
        weights[n] * (b.p50(n) or 0.0) for n in kept
    )
    top_sum, bottom_sum = np.zeros(RESAMPLES), np.zeros(RESAMPLES)
    for name in kept:
        found = drawn[name]
        if found is None:  # no latencies kept (hand-made results): the point alone
            return Interval(point, point, point)
        top_sum += weights[name] * found[0]
        bottom_sum += weights[name] * found[1]
    return interval(point, top_sum / np.maximum(bottom_sum, 1.0))
