"""Workloads run in trials: a warm-up, then every backend's chunk of trial k before trial k + 1,
the first backend taking turns; a raw-driver twin alternates with its workload."""

from __future__ import annotations

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


def test_trials_interleave_the_backends_taking_turns_going_first() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    row, bucket = _backend("row"), _backend("bucket")
    sides = [
        _side((service, _plan(calls, "row", 22), None, None), row),
        _side((service, _plan(calls, "bkt", 22), None, None), bucket),
    ]

    runner._in_trials(sides, trials=2)  # warm-up 2, then trials of 10

    assert calls[:4] == ["row0", "row1", "bkt0", "bkt1"]
    assert calls[4:14] == [f"row{n}" for n in range(2, 12)]
    assert calls[14:24] == [f"bkt{n}" for n in range(2, 12)]
    assert calls[24:34] == [f"bkt{n}" for n in range(12, 22)]  # trial 2: bucket goes first
    assert calls[34:] == [f"row{n}" for n in range(12, 22)]
    for side in sides:
        side.finish(loaded="ingest")
    found = row.result.workloads["pull"]
    assert (found.ops, found.warmup, len(found.trials)) == (20, 2, 2)
    assert found.round_trips.distribution == {"0": 22}  # the warm-up's round trips count
