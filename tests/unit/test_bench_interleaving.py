"""Workloads run in trials: a warm-up, then trial k before trial k + 1, every backend running
a slice of the trial in turn, the first backend taking turns from slice to slice; a raw-driver
twin alternates with its workload."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from imbucket.bench import runner
from imbucket.bench.instrument.roundtrips import RoundTrips
from imbucket.bench.metrics import Recorder
from imbucket.bench.workloads import Op, Subject, Workload


def _plan(calls: list[str], arm: str, count: int) -> list[Op]:
    def op(n: int) -> Op:
        return Op(lambda _subject: lambda: calls.append(f"{arm}{n}"))

    return [op(n) for n in range(count)]


def _backend(label: str = "b") -> Any:
    subject = Subject(service=SimpleNamespace(), raw=SimpleNamespace())  # type: ignore[arg-type]
    result = SimpleNamespace(workloads={}, footprint=SimpleNamespace())
    return SimpleNamespace(
        setup=SimpleNamespace(label=label),
        subject=subject,
        meter=None,
        pages=None,
        maintain=None,
        result=result,
        seconds=0.0,
    )


def _side(runs: Any, backend: Any) -> runner._Side:
    trips = RoundTrips()
    return runner._Side(runs, backend, Recorder(trips), Recorder(trips))


def test_a_twin_alternates_with_its_workload_and_each_gets_its_own_result() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    twin = Workload("raw_pull", "raw pull", "", lambda data: [], raw=True)
    backend = _backend()
    side = _side((service, _plan(calls, "s", 4), twin, _plan(calls, "r", 4)), backend)

    side.run(0, 4, timed=True)
    side.finish(loaded="ingest")

    assert calls == ["r0", "s0", "s1", "r1", "r2", "s2", "s3", "r3"]
    found = backend.result.workloads
    assert set(found) == {"pull", "raw_pull"}
    assert found["pull"].ops == found["raw_pull"].ops == 4


def test_trial_bounds_split_the_plan_after_a_warm_up() -> None:
    assert runner.trial_bounds(40, 5) == [(0, 4), (4, 11), (11, 18), (18, 25), (25, 32), (32, 40)]
    assert runner.trial_bounds(400, 5)[0] == (0, runner.WARMUP_MAX)
    assert runner.trial_bounds(3, 5) == [(0, 0), (0, 1), (1, 2), (2, 3)]  # no empty trial


def test_slices_cut_a_trial_evenly() -> None:
    eight = [(2, 3), (3, 4), (4, 5), (5, 7), (7, 8), (8, 9), (9, 10), (10, 12)]
    assert runner.slices(2, 12) == eight
    assert runner.slices(0, 3) == [(0, 1), (1, 2), (2, 3)]
    assert runner.slices(5, 6, count=4) == [(5, 6)]


def test_trials_interleave_the_backends_slice_by_slice_taking_turns_going_first() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    row, bucket = _backend("row"), _backend("bucket")
    sides = [
        _side((service, _plan(calls, "row", 22), None, None), row),
        _side((service, _plan(calls, "bkt", 22), None, None), bucket),
    ]

    runner._in_trials(sides, trials=2)  # warm-up 2, then trials of 10 in 8 slices

    assert calls[:4] == ["row0", "row1", "bkt0", "bkt1"]
    first_trial = ["row2", "bkt2", "bkt3", "row3", "row4", "bkt4", "bkt5", "bkt6", "row5", "row6"]
    assert calls[4:14] == first_trial
    assert calls[14:20] == ["row7", "bkt7", "bkt8", "row8", "row9", "bkt9"]
    assert calls[20:24] == ["bkt10", "bkt11", "row10", "row11"]
    assert calls[24:28] == ["row12", "bkt12", "bkt13", "row13"]  # trial 2 goes on turning
    for side in sides:
        side.finish(loaded="ingest")
    for backend in (row, bucket):
        found = backend.result.workloads["pull"]
        assert (found.ops, found.warmup, len(found.trials)) == (20, 2, 2)
    assert row.result.workloads["pull"].round_trips.distribution == {"0": 22}  # warm-up counts


def test_past_its_deadline_a_workload_keeps_the_trials_it_finished() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    backend = _backend("row")
    side = _side((service, _plan(calls, "row", 22), None, None), backend)

    runner._in_trials([side], trials=2, deadline=time.perf_counter() - 1.0)  # already spent
    side.finish(loaded="ingest")

    found = backend.result.workloads["pull"]
    assert (found.ops, found.warmup, len(found.trials)) == (10, 2, 1)  # the first trial only
    assert len(calls) == 12
