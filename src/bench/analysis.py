"""What the numbers say: the bucket/row pairs of a run, their ratios, and the JSON analysis.

Everything here is a pure function of ``RunResults``, so a report can be re-rendered, or two
runs compared, from results.json alone. The prose lives in ``imbucket.bench.readings``, the targets
in ``imbucket.bench.targets``, number formatting in ``imbucket.bench.formatting``.
"""

from __future__ import annotations

from dataclasses import dataclass

from imbucket.bench import stats
from imbucket.bench.defaults import OPENIM_BUCKET_SIZE
from imbucket.bench.results import BackendResult, RunResults


@dataclass(frozen=True, slots=True)
class Pair:
    """A bucket store and the row store of the same family, engine and cache."""

    engine: str
    bucket: BackendResult
    row: BackendResult

    @property
    def name(self) -> str:
        """E.g. ``sql/sqlite``, ``mongo/mongodb+redis`` or ``mongo/mongodb (emulated)``."""
        cache = "" if self.bucket.cache == "none" else f"+{self.bucket.cache}"
        emulated = " (emulated)" if self.bucket.emulated else ""
        return f"{self.bucket.family}/{self.engine}{cache}{emulated}"

    def ratio(self, workload: str) -> float | None:
        """Bucket p50 / row p50 of one workload."""
        return ratio(self.bucket.p50(workload), self.row.p50(workload))

    def interval(self, workload: str) -> stats.Interval | None:
        """The bucket/row ratio of one workload with its 95 % interval (paired by trial)."""
        return stats.between(self.bucket, workload, self.row, workload)

    def verdict(self, workload: str) -> str:
        """faster, slower (the bucket layout), on par or inconclusive, from the interval."""
        return stats.verdict(self.interval(workload))


def ratio(a: float | None, b: float | None) -> float | None:
    """Return a / b when both are known and b is not zero."""
    return None if a is None or b is None or b == 0 else a / b


def pairs(results: RunResults) -> list[Pair]:
    """Every (bucket, row) pair of the run that differs only in layout."""
    found = []
    backends = results.ok_backends()
    for bucket in backends:
        if bucket.layout != "bucket" or bucket.family == "memory":
            continue
        if not nearest_default(bucket, backends) or is_variant(bucket, backends):
            continue  # the size nearest OpenIM's 100, in the default encoding, stands for it
        for row in backends:
            if row.engine_key == bucket.engine_key and row.layout == "row":
                found.append(Pair(bucket.engine, bucket, row))
                break
    return found


def is_variant(bucket: BackendResult, backends: list[BackendResult]) -> bool:
    """Whether bucket runs in an encoding asked for next to the same store in its default."""
    return bucket.encoding is not None and any(
        b.store == bucket.store and b.engine_key == bucket.engine_key and b.encoding is None
        for b in backends
    )


def variants(results: RunResults) -> list[Pair]:
    """Every (bucket in an encoding asked for, row) pair that ``pairs`` leaves out."""
    backends = results.ok_backends()
    found = []
    for bucket in backends:
        if bucket.layout != "bucket" or not is_variant(bucket, backends):
            continue
        rows = [r for r in backends if r.layout == "row" and r.engine_key == bucket.engine_key]
        found += [Pair(bucket.engine, bucket, rows[0])] if rows else []
    return found


def nearest_default(bucket: BackendResult, backends: list[BackendResult]) -> bool:
    """Whether no other size of this bucket backend is nearer to OpenIM's 100 slots."""
    if bucket.bucket_size is None:
        return True

    def distance(b: BackendResult) -> tuple[int, int]:
        size = OPENIM_BUCKET_SIZE if b.bucket_size is None else b.bucket_size
        return abs(size - OPENIM_BUCKET_SIZE), size

    same = [b for b in backends if b.store == bucket.store and b.engine_key == bucket.engine_key]
    return min(same, key=distance) is bucket


def index_ratio(pair: Pair) -> tuple[float | None, float | None]:
    """bucket/row data bytes and index bytes per message after ingest (None: not sized)."""
    bucket, row = pair.bucket.footprint.measured(), pair.row.footprint.measured()
    if bucket is None or row is None:
        return None, None
    return (
        ratio(bucket.data_bytes_per_message, row.data_bytes_per_message),
        ratio(bucket.index_bytes_per_message, row.index_bytes_per_message),
    )
