"""Per-workload measurements: latency histogram, round trips, items, errors."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from hdrh.histogram import HdrHistogram

from imbucket.bench.instrument.roundtrips import RoundTrips
from imbucket.bench.results import Latency, RoundTripStats, WorkloadResult

_T = TypeVar("_T")
_MAX_US = 600_000_000  # ten minutes: no single operation takes longer


@dataclass
class Recorder:
    """Times operations one by one and counts their round trips (driver-level)."""

    round_trips: RoundTrips
    histogram: HdrHistogram = field(default_factory=lambda: HdrHistogram(1, _MAX_US, 3))
    ops: int = 0
    items: int = 0
    errors: int = 0
    seconds: float = 0.0
    reads: int = 0
    writes: int = 0
    max_round_trips: int = 0
    drivers: Counter[str] = field(default_factory=Counter)
    write_drivers: Counter[str] = field(default_factory=Counter)
    error_kinds: Counter[str] = field(default_factory=Counter)
    trips: Counter[int] = field(default_factory=Counter)
    warm: int = 0  # warm-up operations: round trips and errors counted, latency not
    trials: list[HdrHistogram] = field(default_factory=list)

    def next_trial(self) -> None:
        """Start a trial: the latencies timed from now on also go into its own histogram."""
        self.trials.append(HdrHistogram(1, _MAX_US, 3))

    def time(self, operation: Callable[[], _T], items: int = 1, timed: bool = True) -> _T | None:
        """Run one operation, record its latency and round trips; errors are counted.

        An untimed (warm-up) operation counts its round trips and errors, not its latency.
        """
        before = self.round_trips.snapshot()
        start = time.perf_counter()
        result: _T | None = None
        try:
            result = operation()
        except Exception as error:  # a failing operation is a result to report, not a crash
            self.errors += 1
            self.error_kinds[f"{type(error).__name__}: {error}"[:200]] += 1
        elapsed = time.perf_counter() - start
        count = self.round_trips.snapshot() - before
        if timed:
            self._timed(elapsed, items)
        else:
            self.warm += 1
        self.reads += count.reads
        self.writes += count.writes
        self.max_round_trips = max(self.max_round_trips, count.total)
        self.trips[count.total] += 1
        self.drivers.update(count.drivers)
        self.write_drivers.update(count.writes_by)
        return result

    def _timed(self, elapsed: float, items: int) -> None:
        self.ops += 1
        self.items += items
        self.seconds += elapsed
        micros = max(1, round(elapsed * 1_000_000))
        self.histogram.record_value(micros)
        if self.trials:
            self.trials[-1].record_value(micros)

    def result(self) -> WorkloadResult:
        """What was measured."""
        ops = max(self.ops + self.warm, 1)  # round trips count the warm-up operations too
        h = self.histogram
        latency = Latency(
            p50=h.get_value_at_percentile(50),
            p95=h.get_value_at_percentile(95),
            p99=h.get_value_at_percentile(99),
            max=h.get_max_value() if self.ops else 0,
            mean=round(h.get_mean_value(), 1) if self.ops else 0,
        )
        trips = RoundTripStats(
            per_op=round((self.reads + self.writes) / ops, 3),
            reads_per_op=round(self.reads / ops, 3),
            writes_per_op=round(self.writes / ops, 3),
            max=self.max_round_trips,
            typical=self.trips.most_common(1)[0][0] if self.trips else 0,
            distribution={str(k): v for k, v in sorted(self.trips.items())},
            by_driver={k: round(v / ops, 3) for k, v in sorted(self.drivers.items()) if v},
            writes_by_driver={
                k: round(v / ops, 3) for k, v in sorted(self.write_drivers.items()) if v
            },
        )
        return WorkloadResult(
            ops=self.ops,
            items=self.items,
            seconds=round(self.seconds, 6),
            ops_per_s=round(self.ops / self.seconds, 1) if self.seconds else 0.0,
            items_per_s=round(self.items / self.seconds, 1) if self.seconds else 0.0,
            latency_us=latency,
            round_trips=trips,
            errors=self.errors,
            error_samples=dict(self.error_kinds.most_common(3)),
            histogram=h.encode().decode("ascii") if self.ops else "",
            warmup=self.warm,
            trials=[t.encode().decode("ascii") for t in self.trials if t.get_total_count()],
        )
