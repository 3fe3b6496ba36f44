"""Offered load: operations scheduled at a fixed rate, timed from their intended start."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from imbucket.bench import offered_load
from imbucket.bench.offered_load import Rate
from imbucket.bench.workloads import BenchCheckFailed


class FakeClock:
    """A clock that moves only when slept on or when an operation takes time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def _ops(
    clock: FakeClock, costs: list[float], calls: list[int]
) -> list[Callable[[], Callable[[], object]]]:
    def make(n: int, cost: float) -> Callable[[], Callable[[], object]]:
        def call() -> None:
            calls.append(n)
            clock.now += cost

        return lambda: call

    return [make(n, cost) for n, cost in enumerate(costs)]


def test_operations_on_time_wait_for_their_intended_start() -> None:
    clock, calls = FakeClock(), []
    run = offered_load.drive(_ops(clock, [0.002] * 4, calls), 100, 10, clock, clock.sleep)
    assert calls == [0, 1, 2, 3]
    assert (run.done, run.late) == (4, 0)
    assert clock.slept == [0.008, 0.008, 0.008]  # due every 10 ms, each took 2 ms
    assert run.histogram.get_max_value() == pytest.approx(2000, rel=0.01)


def test_a_slow_operation_makes_the_next_ones_late_and_their_wait_counts() -> None:
    clock, calls = FakeClock(), []
    ops = _ops(clock, [0.035, 0.001, 0.001, 0.001, 0.001], calls)
    run = offered_load.drive(ops, 100, 10, clock, clock.sleep)
    # op 0 ends at 35 ms: ops 1-3 (due at 10, 20, 30 ms) start late, one after another
    assert (run.done, run.late) == (5, 3)
    histogram = run.histogram
    assert histogram.get_max_value() == pytest.approx(35_000, rel=0.01)
    assert histogram.get_count_at_value(26_000) == 1  # op 1: due at 10 ms, done at 36 ms
    assert histogram.get_count_at_value(17_000) == 1  # op 2: due at 20 ms, done at 37 ms


def test_the_deadline_stops_the_operations_due_after_it() -> None:
    clock, calls = FakeClock(), []
    run = offered_load.drive(_ops(clock, [0.001] * 50, calls), 10, 1.0, clock, clock.sleep)
    assert run.done == 11  # due at 0, 0.1, …, 1.0 s
    assert calls == list(range(11))


def test_a_failing_operation_is_an_error_but_a_pull_whose_data_changed_is_not() -> None:
    """A store error counts; a bench check that no longer holds on the tagged store does not."""
    clock = FakeClock()

    def failing(error: Exception) -> Callable[[], Callable[[], object]]:
        def call() -> None:
            clock.now += 0.001
            raise error

        return lambda: call

    thunks = [failing(RuntimeError("store down")), failing(BenchCheckFailed("pull_latest"))]
    run = offered_load.drive(thunks, 100, 10, clock, clock.sleep)
    assert (run.done, run.errors) == (2, 1)


def test_rates_parse_as_shares_of_the_closed_loop_throughput_or_ops_per_second() -> None:
    assert offered_load.parse_rates("50%, 90%,400") == (Rate(0.5), Rate(0.9), Rate(ops_per_s=400))
    assert Rate(0.5).resolve(1000) == 500
    assert Rate(ops_per_s=400).resolve(1000) == 400
    for wrong in ("fast", "-5", "0%", ""):
        with pytest.raises(offered_load.RateError):
            offered_load.parse_rates(wrong)
