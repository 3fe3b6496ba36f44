"""The raw-driver twin of a workload is timed interleaved with it, taking turns going first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from imbucket.bench import runner
from imbucket.bench.instrument.roundtrips import RoundTrips
from imbucket.bench.runner import Observer
from imbucket.bench.workloads import Op, Subject, Workload


def _plan(calls: list[str], arm: str, count: int) -> list[Op]:
    def op(n: int) -> Op:
        return Op(lambda _subject: lambda: calls.append(f"{arm}{n}"))

    return [op(n) for n in range(count)]


def _backend() -> Any:
    subject = Subject(service=SimpleNamespace(), raw=SimpleNamespace())  # type: ignore[arg-type]
    return SimpleNamespace(
        setup=SimpleNamespace(label="b"), subject=subject, meter=None, pages=None
    )


def test_a_twin_alternates_with_its_workload_and_each_gets_its_own_result() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    twin = Workload("raw_pull", "raw pull", "", lambda data: [], raw=True)
    runs = (service, _plan(calls, "s", 4), twin, _plan(calls, "r", 4))
    probe = SimpleNamespace(round_trips=RoundTrips())

    found = runner._run_workload(runs, _backend(), probe, Observer())  # type: ignore[arg-type]

    assert calls == ["r0", "s0", "s1", "r1", "r2", "s2", "s3", "r3"]
    assert set(found) == {"pull", "raw_pull"}
    assert found["pull"].ops == found["raw_pull"].ops == 4


def test_without_a_twin_only_the_workload_runs() -> None:
    calls: list[str] = []
    service = Workload("pull", "pull", "", lambda data: [])
    probe = SimpleNamespace(round_trips=RoundTrips())

    found = runner._run_workload(  # type: ignore[arg-type]
        (service, _plan(calls, "s", 3), None, None), _backend(), probe, Observer()
    )

    assert calls == ["s0", "s1", "s2"]
    assert list(found) == ["pull"]
