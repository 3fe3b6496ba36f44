"""The report opens with one answer per engine and keeps the project's targets for its end."""

from __future__ import annotations

from types import SimpleNamespace

from imbucket.bench import answer, report
from imbucket.bench.document import Heading
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
    assert "on par, so the smaller footprint decides" in found


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
