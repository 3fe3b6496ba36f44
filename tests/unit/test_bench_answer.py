"""The report opens with one answer per engine and keeps the project's targets for its end."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from imbucket.bench import answer, report, stats
from imbucket.bench.blocks import Heading
from tests.unit import bench_fakes
from tests.unit.bench_fakes import typed


def test_the_answer_names_the_layout_its_wins_and_its_bytes() -> None:
    (found,) = answer.answers(typed(bench_fakes.results(row_latest=200, bucket_latest=100)))
    assert found.startswith("sql/sqlite: choose the bucket layout for this traffic.")
    assert "the bucket layout is faster" in found
    assert "The bucket layout wins pull_latest(20) 0.50×" in found
    assert "The row layout wins no workload beyond the on-par band." in found
    assert "402 B per message (400 data + 2 index) vs 450 B (400 + 50)" in found
    assert "The verdict depends on" in found and "the bucket size (100 slots here" in found


def test_the_answer_turns_with_the_ratio() -> None:
    (found,) = answer.answers(typed(bench_fakes.results(row_latest=100, bucket_latest=300)))
    assert found.startswith("sql/sqlite: choose the row layout for this traffic.")
    assert "The row layout wins pull_latest(20) 3.00×" in found


def test_on_par_in_time_the_smaller_footprint_decides() -> None:
    (found,) = answer.answers(typed(bench_fakes.results(row_latest=100, bucket_latest=105)))
    assert found.startswith("sql/sqlite: choose the bucket layout")
    assert "on par, so the smaller footprint after ingest decides" in found


def test_pages_per_operation_are_read_when_the_results_carry_them() -> None:
    assert answer.pages_per_op(SimpleNamespace(pages_per_op=3.5)) == 3.5  # type: ignore[arg-type]
    pages = SimpleNamespace(pages=SimpleNamespace(per_op=2.0))
    assert answer.pages_per_op(pages) == 2.0  # type: ignore[arg-type]
    assert answer.pages_per_op(SimpleNamespace()) is None  # type: ignore[arg-type]


def test_the_report_opens_with_the_answers_and_ends_with_the_targets() -> None:
    blocks = report.build(typed(bench_fakes.results()))
    sections = [b.text for b in blocks if isinstance(b, Heading) and b.level == 2]
    assert sections[0] == "The answer, per engine"
    assert sections[-1] == "The project's own targets"
    assert "Reference: the in-process memory backend" in sections


def _pair(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sql-row and sql-bucket backends of bench_fakes.results."""
    by_label = {b["label"]: b for b in data["backends"]}
    return by_label["sql-row/sqlite"], by_label["sql-bucket/sqlite"]


def _sentence_with(text: str, word: str) -> str:
    return next(s for s in text.split(". ") if word in s)


def test_an_interval_straddling_the_band_edge_is_inconclusive_never_faster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    straddling = stats.Interval(0.85, 0.78, 0.90)  # below 1, across the band's 0.8
    monkeypatch.setattr(answer.stats, "mix_interval", lambda *_: straddling)
    (found,) = answer.answers(typed(bench_fakes.results(row_latest=100, bucket_latest=85)))
    figure = _sentence_with(found, "0.85× [0.78–0.90]")
    assert "inconclusive" in figure and "faster" not in figure
    assert "so the smaller footprint after ingest decides" in figure
    assert found.startswith("sql/sqlite: choose the bucket layout")  # 402 B vs 450 B


def test_the_footprint_after_the_tag_writes_breaks_a_tie() -> None:
    data = bench_fakes.results(row_latest=100, bucket_latest=105)
    row, bucket = _pair(data)
    for backend, data_bytes in ((row, 400.0), (bucket, 520.0)):
        end = dict(backend["footprint"]["after_ingest"], data_bytes_per_message=data_bytes)
        backend["footprint"]["end"] = end
    (found,) = answer.answers(typed(data))
    assert found.startswith("sql/sqlite: choose the row layout")  # 522 B vs 450 B at the end
    assert "on par, so the smaller footprint after the tag writes decides" in found
    assert "after ingest the bucket layout 402 B per message" in found
    assert "after the tag writes the bucket layout 522 B per message" in found
    assert "A tie in time is broken by the bytes after the tag writes" in found


def _contention(workers: int, ops: int, planned: int, ops_per_s: float) -> dict[str, Any]:
    return {
        "scenario": "hot_group",
        "mode": "threads",
        "workers": workers,
        "ops": ops,
        "planned": planned,
        "writes": ops,
        "seconds": 1.0,
        "ops_per_s": ops_per_s,
        "latency_us": {"p50": 100, "p99": 300, "max": 400},
        "conflicts": {},
        "conflicts_per_write": 0.0,
        "errors": 0,
    }


def test_contention_runs_cut_by_their_deadline_are_left_out_and_named() -> None:
    data = bench_fakes.results()
    row, bucket = _pair(data)
    row["contention"] = [_contention(1, 160, 160, 390.0), _contention(4, 160, 160, 800.0)]
    bucket["contention"] = [_contention(1, 160, 160, 109.0), _contention(4, 137, 160, 90.0)]
    (found,) = answer.answers(typed(data))
    quoted = _sentence_with(found, "Under contention")
    assert "one hot group at 1 threads: 109 ops/s (bucket) vs 390 (row)" in quoted
    assert "800" not in quoted and "90 ops/s" not in quoted
    assert "cut short by their deadline: one hot group at 4 threads (bucket, 137/160 done)" in found


def test_every_workload_of_the_mix_that_did_not_run_is_named_with_why() -> None:
    data = bench_fakes.results()
    data["parameters"]["dataset"]["largest_conversation"] = 50
    row, _ = _pair(data)
    row["workloads"]["clear_small"]["ops"] = 0
    row["workloads"]["clear_small"]["errors"] = 10
    (found,) = answer.answers(typed(data))
    missing = _sentence_with(found, "Not in this answer")
    assert "pull_range (12 % of the mix): it needs a conversation of at least 100 messages" in (
        missing
    )
    assert "the largest holds 50" in missing
    assert "clear_small (1 % of the mix): every operation failed on sql-row/sqlite" in missing
    assert "ingest (18 % of the mix): not among the run's workloads" in missing
