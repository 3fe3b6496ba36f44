"""The ratio chart draws each bucket/row ratio with its 95 % interval as whiskers."""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from imbucket.bench import charts
from imbucket.bench.analysis import pairs
from tests.unit import bench_fakes
from tests.unit.bench_fakes import typed


def _trial(center: int) -> str:
    histogram = HdrHistogram(1, 600_000_000, 3)
    for value in range(center - 20, center + 21):
        histogram.record_value(value)
    return histogram.encode().decode("ascii")


def test_the_ratio_whiskers_reach_the_ends_of_each_interval() -> None:
    data = bench_fakes.results()
    for b in (b for b in data["backends"] if b["store"].startswith("sql-")):
        center = 100 if b["store"] == "sql-bucket" else 200
        b["workloads"]["pull_latest"]["trials"] = [_trial(center + 7 * (k - 2)) for k in range(5)]
    [pair] = pairs(typed(data))
    found, point = pair.interval("pull_latest"), pair.ratio("pull_latest")
    assert found is not None and point is not None and found.low < found.high
    below, above = charts.whiskers(pair, ["pull_latest", "pull_range"])
    assert below[0] == point - found.low > 0 and above[0] == found.high - point > 0
    assert (below[1], above[1]) == (0.0, 0.0)  # no latencies kept: the point alone
    assert charts.ratios(typed(data))  # the chart draws them
