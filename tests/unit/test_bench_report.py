"""Report rendering, targets, readings and --compare, on hand-made results."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from imbucket.app.cli import cli
from imbucket.bench import report
from imbucket.bench.analysis import pairs
from imbucket.bench.blocks import Table, to_markdown
from imbucket.bench.compare import compare
from imbucket.bench.report import analysis
from imbucket.bench.results import to_json
from imbucket.bench.targets import targets
from tests.unit import bench_fakes
from tests.unit.bench_fakes import typed


def _verdicts(results: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(t.target, t.scope): t.verdict for t in targets(typed(results))}


def test_pairs_match_bucket_and_row_of_one_engine_only() -> None:
    found = pairs(typed(bench_fakes.results()))
    assert [(p.name, p.bucket.store, p.row.store) for p in found] == [
        ("sql/sqlite", "sql-bucket", "sql-row")
    ]


def test_targets_are_measured_from_the_numbers() -> None:
    verdicts = _verdicts(bench_fakes.results(row_latest=200))
    # the fakes' pulls take 2 round trips (watermarks, then data): one too many
    assert verdicts[("pull ≤ 1 round trip", "sql-row/sqlite")] == "FAIL"
    assert verdicts[("clear_history: one write, flat cost", "sql-bucket/sqlite")] == "pass"
    # the service takes 200 µs where the raw query takes 100 µs: 2× > 1.5×
    assert verdicts[("service overhead ≤ 1.5× raw driver", "sql-row/sqlite")] == "FAIL"
    # 2 vs 50 index bytes per message = 1/25
    assert verdicts[("sql-bucket index bytes/msg ≤ 1/20 of sql-row", "sqlite")] == "pass"
    assert verdicts[("make bench < 3 min on 2 cores", "this run")] == "n/a"


def test_a_pull_in_one_round_trip_passes_and_in_two_fails() -> None:
    results = bench_fakes.results()
    results["backends"][2]["workloads"]["pull_latest"] = bench_fakes.run(100, 1, max_trips=1)
    assert _verdicts(results)[("pull ≤ 1 round trip", "sql-bucket/sqlite")] == "pass"
    results["backends"][2]["workloads"]["pull_range"] = bench_fakes.run(100, 2, max_trips=2)
    assert _verdicts(results)[("pull ≤ 1 round trip", "sql-bucket/sqlite")] == "FAIL"


def test_reading_states_the_ratio_and_who_wins() -> None:
    ratios = analysis(typed(bench_fakes.results(row_latest=200, bucket_latest=100))).ratios
    latest = next(r for r in ratios if r.workload == "pull_latest")
    assert latest.p50_ratio == 0.5
    first, second = latest.reading
    assert "0.50×" in first and "bucket layout is 2.0× faster" in first
    assert second.startswith("Both need 2 round trips per op")


def test_a_reading_reads_no_direction_into_a_ratio_on_par() -> None:
    results = bench_fakes.results(row_latest=100, bucket_latest=95)
    results["backends"][2]["workloads"]["pull_latest"] = bench_fakes.run(95, per_op=3)
    ratios = analysis(typed(results)).ratios
    first, second = next(r for r in ratios if r.workload == "pull_latest").reading
    assert "on par" in first
    assert second.startswith("It needs more round trips (3 vs 2) per op.")
    assert "cheaper" not in second and "gap" not in second


def test_report_files_hold_every_backend_and_workload(tmp_path: Path) -> None:
    results = bench_fakes.results()
    files = report.write(typed(results), tmp_path / "r")
    markdown, html = files.markdown.read_text(), files.html.read_text()
    for b in results["backends"]:
        assert b["label"] in markdown and b["label"] in html
    for w in results["parameters"]["workloads"]:
        assert w["title"] in markdown and w["title"] in html
    assert "StoreUnavailable: no server" in markdown  # why a backend was skipped
    assert "data:image/png;base64," in html and "<img" in html
    assert (tmp_path / "r" / "ratios.png").read_bytes()[:4] == b"\x89PNG"
    assert "](ratios.png)" in markdown
    saved = json.loads(files.results.read_text())
    assert saved["analysis"]["targets"] and saved["analysis"]["ratios"]


def test_markdown_tables_escape_pipes_and_align_numbers() -> None:
    text = to_markdown([Table(("name", "value"), (("a|b", "12"), ("c", "3.5")))])
    assert "| a\\|b | 12 |" in text
    assert "|---|---:|" in text


def test_compare_shows_the_change_per_backend_and_workload(tmp_path: Path) -> None:
    old = typed(bench_fakes.results(row_latest=200))
    new = typed(bench_fakes.results(row_latest=300))
    changes = {(c.backend, c.workload): c for c in compare(old, new)}
    assert changes[("sql-row/sqlite", "pull_latest")].p50_change == 0.5
    assert changes[("sql-bucket/sqlite", "pull_latest")].p50_change == 0.0
    assert ("mongo-row/mongodb", "pull_latest") not in changes  # skipped in both

    files = report.write(new, tmp_path / "new", previous=old)
    assert "Change since the previous run" in files.markdown.read_text()
    summary = json.loads(files.results.read_text())["compare"]["summary"]
    assert summary["slower"] == 2  # the service and the raw arm

    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(bench_fakes.results(row_latest=200)))
    result = CliRunner().invoke(cli, ["compare", str(old_path), str(files.results)])
    assert result.exit_code == 0, result.output
    assert "+50%" in result.output


def test_an_emulated_engine_is_named_and_its_latencies_marked_not_representative() -> None:
    results = bench_fakes.results()
    for b in results["backends"]:
        if b["store"].startswith("sql-"):
            b["version"], b["emulated"] = "mongoeco (MongoDB 7.0 wire protocol)", True
    [pair] = pairs(typed(results))
    assert pair.name == "sql/sqlite (emulated)"
    markdown = to_markdown(report.build(typed(results)))
    assert "Emulated engine: sql-row/sqlite on mongoeco (MongoDB 7.0 wire protocol)" in markdown
    assert "not representative" in markdown and "round trips" in markdown


def test_a_report_without_emulated_engines_has_no_such_warning() -> None:
    assert "Emulated engine" not in to_markdown(report.build(typed(bench_fakes.results())))


def test_results_json_reads_back_into_the_same_results(tmp_path: Path) -> None:
    data = bench_fakes.results()
    assert to_json(typed(data)) == data
    files = report.write(typed(data), tmp_path)
    again = report.load(files.results)
    assert to_json(again) == json.loads(files.results.read_text())
    assert [b.label for b in again.ok_backends()] == [
        "memory",
        "sql-row/sqlite",
        "sql-bucket/sqlite",
    ]


def test_a_file_that_is_not_a_results_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(ValueError, match=r"not a benchmark results\.json"):
        report.load(path)


def test_a_store_that_cannot_be_sized_keeps_its_reason(tmp_path: Path) -> None:
    data = bench_fakes.results()
    data["backends"][0]["footprint"]["end"] = {"error": "StoreUnavailable: gone"}
    results = typed(data)
    assert to_json(results) == data
    assert "StoreUnavailable: gone" in report.write(results, tmp_path).markdown.read_text()


def test_the_console_tables_keep_a_label_in_brackets() -> None:
    """An encoding variant's label ("…[openim]") is text, not Rich markup to strip."""
    from rich.console import Console

    from imbucket.bench import console as bench_console

    data = bench_fakes.results()
    data["backends"][2]["label"] = "sql-bucket/sqlite[openim]"
    results = typed(data)
    screen = Console(width=250, record=True)
    screen.print(bench_console.summary_table(results))
    screen.print(bench_console.targets_table(results))
    text = screen.export_text()
    assert text.count("sql-bucket/sqlite[openim]") >= 2  # a column header and target lines


SAMPLE = Path(__file__).parents[2] / "docs" / "samples" / "bench-tiny" / "results.json"


def test_each_workloads_intro_counts_the_operations_its_table_shows() -> None:
    blocks = report.build(report.load(SAMPLE))
    checked = 0
    for intro, table in itertools.pairwise(blocks):
        text = getattr(intro, "text", "")
        timed = re.search(r"the ([\d,]+) after them timed \(the table's ops\)", text)
        if timed is None or not isinstance(table, Table):
            continue
        ops = table.headers.index("ops")
        assert {row[ops] for row in table.rows} == {timed[1]}, text
        checked += 1
    assert checked >= 10
