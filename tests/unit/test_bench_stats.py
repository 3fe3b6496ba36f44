"""Confidence intervals of ratios, the verdict words they earn, and the machine's load."""

from __future__ import annotations

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from imbucket.bench import machine, stats
from imbucket.bench.stats import Interval


def _encoded(values: list[int]) -> str:
    histogram = HdrHistogram(1, 600_000_000, 3)
    for value in values:
        histogram.record_value(value)
    return histogram.encode().decode("ascii")


def test_samples_read_back_every_recorded_latency() -> None:
    (found,) = stats.samples([_encoded([100, 100, 200, 300])])
    assert sorted(found.tolist()) == [100, 100, 200, 300]


def test_constant_arms_give_an_interval_of_the_ratio_alone() -> None:
    a = [np.full(40, 100.0) for _ in range(5)]
    b = [np.full(40, 200.0) for _ in range(5)]
    found = stats.ratio_from(0.5, stats.replicates(a, b))
    assert found == Interval(0.5, 0.5, 0.5)


def test_the_interval_holds_the_ratio_of_spread_arms_and_stays_inside_their_range() -> None:
    a = [np.arange(90.0, 111.0) for _ in range(5)]  # median 100
    b = [np.arange(190.0, 211.0) for _ in range(5)]  # median 200
    found = stats.ratio_from(0.5, stats.replicates(a, b))
    assert found.low <= 0.5 <= found.high
    assert found.low >= 90 / 210 and found.high <= 110 / 190


def test_a_trial_apart_from_the_others_widens_the_interval() -> None:
    steady = [np.arange(90.0, 111.0) for _ in range(5)]
    bursts = [*steady[:4], np.arange(290.0, 311.0)]  # one trial met a burst of load
    calm = stats.ratio_from(1.0, stats.replicates(steady, steady))
    loaded = stats.ratio_from(1.0, stats.replicates(bursts, steady))
    assert loaded.high - loaded.low > calm.high - calm.low


def test_the_same_arms_give_the_same_interval_every_time() -> None:
    a = [np.arange(90.0, 111.0) for _ in range(3)]
    b = [np.arange(100.0, 131.0) for _ in range(3)]
    first, again = (stats.ratio_from(0.8, stats.replicates(a, b)) for _ in range(2))
    assert first == again


@pytest.mark.parametrize(
    ("interval", "word"),
    [
        (Interval(0.5, 0.4, 0.6), "faster"),
        (Interval(1.6, 1.3, 1.9), "slower"),
        (Interval(1.0, 0.9, 1.1), "on par"),
        (Interval(0.8, 0.7, 0.9), "inconclusive"),
        (Interval(1.25, 1.1, 1.4), "inconclusive"),
        (None, "inconclusive"),
    ],
)
def test_verdict_words_follow_the_interval_against_the_on_par_band(
    interval: Interval | None, word: str
) -> None:
    assert stats.verdict(interval) == word


def test_a_time_target_is_judged_on_the_interval_bound() -> None:
    assert stats.judged(Interval(1.3, 1.2, 1.45), 1.5) is True
    assert stats.judged(Interval(1.8, 1.6, 2.0), 1.5) is False
    assert stats.judged(Interval(1.4, 1.2, 1.7), 1.5) is None  # straddles: inconclusive


def test_other_processes_taking_a_quarter_of_the_cpu_flag_a_busy_machine() -> None:
    assert machine.others_load(2, [0.5, 0.4, 0.3], [0.6, 0.5, 0.4], 0.3, 10.0).busy
    assert not machine.others_load(2, [0.5, 0.4, 0.3], [0.6, 0.5, 0.4], 0.1, 10.0).busy
    assert machine.others_load(2, [9.0, 8.0, 7.0], [9.0, 8.0, 7.0], None, 10.0).busy
    # The load average lags: right after another run it counts that run, the share does not.
    assert not machine.others_load(2, [2.4, 2.6, 2.9], [2.4, 2.3, 2.8], 0.07, 112.0).busy
    calm = machine.others_load(2, [0.5, 0.4, 0.3], [0.6, 0.5, 0.4], 0.1, 10.0)
    assert machine.warning(calm) == ""
    assert "Busy machine" in machine.warning(machine.others_load(2, [3.0], [3.0], 0.5, 1.0))


def test_a_bound_next_to_a_band_edge_is_printed_on_its_own_side() -> None:
    straddling = stats.Interval(1.28, 1.2481, 1.32)
    assert stats.verdict(straddling) == stats.INCONCLUSIVE
    assert stats.fmt_interval(straddling) == "1.28× [1.248–1.32]"
    outside = stats.Interval(1.28, 1.2521, 1.32)
    assert stats.verdict(outside) == stats.SLOWER
    assert stats.fmt_interval(outside) == "1.28× [1.252–1.32]"
    assert (
        stats.fmt_interval(stats.Interval(1.1, 1.04, 1.2049), edges=(1.2,)) == "1.10× [1.04–1.205]"
    )
    assert stats.fmt_interval(stats.Interval(1.0, 0.91, 1.12)) == "1.00× [0.91–1.12]"
