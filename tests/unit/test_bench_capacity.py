"""The capacity plan and the pages section, recomputed from results.json's numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from imbucket.app.cli import cli
from imbucket.bench import capacity, report
from imbucket.bench.blocks import Table, to_markdown
from imbucket.bench.traffic import Traffic
from tests.unit.bench_fakes import results, typed

TOUCHED = {"pull_latest": 12.0, "pull_range": 30.0, "ingest": 50.0}


def counted() -> dict[str, Any]:
    """The fake run with pages counted on the SQL backends, for three workloads of the mix."""
    data = results()
    for b in data["backends"][1:3]:
        b["pages_source"] = "test pages"
        for name, touched in TOUCHED.items():
            run = dict(b["workloads"]["pull_latest"])
            run["pages"] = {"touched_per_op": touched, "read_per_op": 1.0}
            b["workloads"][name] = run
    return data


def test_the_plan_is_recomputable_from_results_json(tmp_path: Path) -> None:
    data = counted()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    target = capacity.Target(messages=2_000_000, pulls_per_s=700.0)
    needs = {n.label: n for n in capacity.plan(report.load(path), target)}
    weights = Traffic().weights()
    pulls = weights["pull_latest"] + weights["pull_range"] + weights["pull_scattered"]
    for b in json.loads(path.read_text())["backends"][1:3]:
        f = b["footprint"]["after_ingest"]
        pages = sum(700.0 * weights[n] / pulls * TOUCHED[n] for n in TOUCHED)
        found = needs[b["label"]]
        assert found.disk_bytes == 2_000_000 * (
            f["data_bytes_per_message"] + f["index_bytes_per_message"]
        )
        assert found.index_ram_bytes == 2_000_000 * f["index_bytes_per_message"]
        assert abs(found.pages_per_s - pages) < 1e-6
        assert found.read_bytes_per_s is not None
        assert abs(found.read_bytes_per_s - pages * 4096) < 1e-3
        assert "pull_scattered" in found.missing  # in the mix, not counted: said, not guessed
    assert "memory" not in needs  # no pages counted: no plan


def test_the_report_shows_pages_per_op_and_the_plan_labelled_a_projection() -> None:
    blocks = report.build(typed(counted()))
    text = to_markdown(blocks)
    assert "## Pages per operation" in text
    assert "## Capacity plan (a projection)" in text
    tables = [b for b in blocks if isinstance(b, Table) and "pages touched/s" in b.headers]
    assert [row[0] for row in tables[0].rows] == ["sql-row/sqlite", "sql-bucket/sqlite"]


def test_plan_command_prints_the_projection(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(counted()))
    out = CliRunner().invoke(cli, ["plan", str(path), "--messages", "1000"])
    assert out.exit_code == 0, out.output
    assert "sql-bucket/sqlite" in out.output and "formulas" in out.output


def test_plan_prints_a_label_with_brackets_as_it_is(tmp_path: Path) -> None:
    data = counted()
    data["backends"][2]["label"] = "sql-bucket/sqlite[openim]"
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(cli, ["plan", str(path), "--messages", "1000"])
    assert out.exit_code == 0, out.output
    assert "sql-bucket/sqlite[openim]" in out.output


def test_plan_refuses_what_it_cannot_plan_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(counted()))
    negative = CliRunner().invoke(cli, ["plan", str(path), "--messages", "-5"])
    assert negative.exit_code == 2 and "--messages" in negative.output
    report_md = tmp_path / "report.md"
    report_md.write_text("# a report\n")
    wrong = CliRunner().invoke(cli, ["plan", str(report_md)])
    assert wrong.exit_code == 2
    assert wrong.output.strip().splitlines() == [
        f"imbucket plan: ValueError: {report_md} is not a benchmark results.json: not JSON "
        "(Expecting value: line 1 column 1 (char 0))"
    ]
