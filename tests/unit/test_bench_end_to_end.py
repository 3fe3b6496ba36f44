"""`imbucket bench --scale tiny` end to end: files, JSON schema, and what the HTML shows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat
from typer.testing import CliRunner

from imbucket.app.cli import cli
from imbucket.bench.spec import DEFAULT_BACKENDS
from imbucket.bench.workloads import WORKLOAD_NAMES

CHROMIUM = Path("/usr/bin/chromium")
LATENCY_KEYS = {"p50", "p95", "p99", "max", "mean"}
TRIP_KEYS = {"per_op", "reads_per_op", "writes_per_op", "max", "typical", "distribution"}


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One tiny run of the embedded default backends, shared by the tests below."""
    folder = tmp_path_factory.mktemp("bench") / "report"
    result = CliRunner().invoke(cli, ["bench", "--scale", "tiny", "--out", str(folder)])
    assert result.exit_code == 0, result.output
    return folder, result.output


def _check_run(run: dict[str, Any]) -> None:
    assert isinstance(run["ops"], int) and run["ops"] > 0
    assert run["errors"] == 0, run["error_samples"]
    assert set(run["latency_us"]) == LATENCY_KEYS
    assert 0 < run["latency_us"]["p50"] <= run["latency_us"]["p95"] <= run["latency_us"]["p99"]
    assert set(run["round_trips"]) >= TRIP_KEYS
    assert run["round_trips"]["per_op"] > 0  # every operation reaches the engine
    assert run["ops_per_s"] > 0


def test_results_json_follows_the_schema(tiny_report: tuple[Path, str]) -> None:
    folder, _ = tiny_report
    results = json.loads((folder / "results.json").read_text())
    assert results["schema"] == "imbucket-bench/1"
    assert {"parameters", "machine", "git", "backends", "analysis", "duration_s"} <= set(results)
    assert results["parameters"]["scale"] == "tiny"
    assert results["parameters"]["dataset"]["messages"] > 1_000
    planned = {w["name"] for w in results["parameters"]["workloads"]}
    # Every workload but the spill past the 1,000-deleter inline cap: tiny groups are smaller.
    assert planned == set(WORKLOAD_NAMES) - {"hot_delete_spilled"}
    assert results["machine"]["cpu_count"] >= 1
    labels = [b["label"] for b in results["backends"]]
    assert labels == ["memory", "sql-row/sqlite", "sql-bucket/sqlite", "sql-bucket/sqlite[openim]"]
    assert [b.get("encoding") for b in results["backends"]] == [None, None, None, "openim"]
    assert len(labels) == len(DEFAULT_BACKENDS)
    for backend in results["backends"]:
        assert backend["version"]
        if backend["status"] != "ok":  # only a backend this build does not have may skip
            assert "not available in this build" in backend["reason"], backend["reason"]
            continue
        expected = planned - ({"raw_pull_latest"} if not backend["raw_arm"] else set())
        if backend.get("encoding"):  # an encoding variant is bulk-loaded: no timed ingest
            expected -= {"ingest"}
        assert set(backend["workloads"]) == expected
        for run in backend["workloads"].values():
            _check_run(run)
        _check_log_and_bytes(backend)
        footprint = backend["footprint"]["after_ingest"]
        assert footprint["messages"] == results["parameters"]["dataset"]["messages"]
        assert footprint["data_bytes_per_message"] > 0
    assert results["backends"][0]["status"] == "ok"
    assert [b.get("raw_arm") for b in results["backends"] if b["status"] == "ok"] == [
        b["store"] in {"sql-row", "sql-bucket"} for b in results["backends"] if b["status"] == "ok"
    ]
    for target in results["analysis"]["targets"]:
        assert target["passed"] in (True, False, None)
    _check_contention(results)


def _check_log_and_bytes(backend: dict[str, Any]) -> None:
    """SQLite backends measure their WAL per workload; every backend counts the hot pulls' bytes."""
    workloads = backend["workloads"]
    assert set(workloads["pull_hot"]["received"]) == {"per_op", "by_driver"}
    if backend["store"] == "memory":
        assert "in process" in backend["log_missing"]
        assert "log" not in workloads["ingest"]
        return
    assert backend["log_source"].startswith("SQLite WAL")
    if "ingest" in workloads:  # an encoding variant's is bulk-loaded, not timed
        assert workloads["ingest"]["log"]["per_item"] > 0  # every message is written to the WAL
    assert workloads["pull_latest"]["log"]["bytes"] == 0  # a read writes nothing
    assert workloads["pull_hot"]["received"]["by_driver"]["sql"] > 0


def _check_contention(results: dict[str, Any]) -> None:
    """Every scenario at N = 1, 4, 16 as threads; as processes where another process can open."""
    plan = results["parameters"]["contention"]
    assert plan["workers"] == [1, 4, 16] and plan["ops"] == 48
    for backend in results["backends"]:
        if backend.get("encoding") is not None:  # an encoding variant skips contention
            assert "contention" not in backend
            continue
        runs = backend["contention"]
        threads = {(r["scenario"], r["workers"]) for r in runs if r["mode"] == "threads"}
        assert threads == {
            (s, n) for s in ("hot_group", "many_groups", "readers") for n in (1, 4, 16)
        }
        processes = {(r["scenario"], r["workers"]) for r in runs if r["mode"] == "processes"}
        shared = backend["store"] != "memory"
        assert processes == ({("hot_group", 4), ("hot_group", 16)} if shared else set())
        for run in runs:
            assert run["errors"] == 0, run["error_samples"]
            assert 0 < run["ops"] <= run["planned"] and run["writes"] > 0
            assert set(run["conflicts"]) == {
                "bucket_create_lost", "bucket_update_lost", "row_upsert_lost", "sql_retry"
            }  # fmt: skip


def test_every_workload_and_backend_is_in_both_reports(tiny_report: tuple[Path, str]) -> None:
    folder, output = tiny_report
    results = json.loads((folder / "results.json").read_text())
    markdown = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    ran = {name for b in results["backends"] for name in b.get("workloads", {})}
    for workload in results["parameters"]["workloads"]:
        if workload["name"] in ran:
            assert workload["title"] in markdown and workload["title"] in html
    for backend in results["backends"]:
        assert backend["label"] in markdown and backend["label"] in html
    assert "data:image/png;base64," in html
    assert "## Contention" in markdown and "![throughput against concurrent workers" in markdown
    assert "Bucket size sweep" not in markdown  # only with --bucket-size
    assert f"report: {folder / 'report.html'}" in output.replace("\n        ", " ")


def test_sends_against_the_raw_driver_are_in_the_results_and_both_reports(
    tiny_report: tuple[Path, str],
) -> None:
    folder, _ = tiny_report
    results = json.loads((folder / "results.json").read_text())
    assert results["parameters"]["sends"] == {"callers": [1, 8, 64], "calls": 16, "rounds": 3}
    measured = [b for b in results["backends"] if b.get("sends")]
    assert [b["label"] for b in measured] == ["sql-row/sqlite", "sql-bucket/sqlite"]
    for backend in measured:
        cells = {(r["scenario"], r["callers"]): r for r in backend["sends"]}
        assert set(cells) == {(s, n) for s in ("many", "hot") for n in (1, 8, 64)}
        assert cells[("many", 64)]["calls"] == 64  # every caller sends at least once a round
        assert all(
            r["service_calls_per_s"] > 0 and r["raw_calls_per_s"] > 0 for r in cells.values()
        )
    left_out = {b["label"]: b["sends_missing"] for b in results["backends"] if "sends_missing" in b}
    assert set(left_out) == {"memory", "sql-bucket/sqlite[openim]"}
    markdown, html = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    for text in (markdown, html):
        assert "Sends against the raw driver" in text and "raw/service" in text
    lines = [t for t in results["analysis"]["targets"] if t["target"].startswith("send through")]
    assert {t["scope"]: t["passed"] is not None for t in lines} == {
        "memory": False,
        "sql-row/sqlite": True,
        "sql-bucket/sqlite": True,
        "sql-bucket/sqlite[openim]": False,
    }
    assert markdown.count("| send through the service ≤ 2× raw driver |") == 4


def test_compare_with_an_earlier_run(tiny_report: tuple[Path, str], tmp_path: Path) -> None:
    folder, _ = tiny_report
    args = ["bench", "--scale", "tiny", "--backend", "memory", "-w", "pull_latest"]
    args += ["--out", str(tmp_path / "again"), "--compare", str(folder / "results.json")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "change since" in result.output
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert set(again["backends"][0]["workloads"]) == {"ingest", "pull_latest"}  # ingest loads
    for run in again["backends"][0]["workloads"].values():
        _check_run(run)
    changes = again["compare"]["changes"]
    assert [(c["backend"], c["workload"]) for c in changes] == [
        ("memory", "ingest"),
        ("memory", "pull_latest"),
    ]


def test_report_html_renders_in_a_browser(tiny_report: tuple[Path, str], tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: the headless rendering check needs Chromium")
    folder, _ = tiny_report
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2000",
            (folder / "report.html").resolve().as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.exists(), "chromium wrote no screenshot"
    with Image.open(shot) as image:
        stats = ImageStat.Stat(image.convert("L"))
    assert stats.stddev[0] > 10, "the rendered report looks blank"


def test_unknown_backend_is_refused() -> None:
    result = CliRunner().invoke(cli, ["bench", "--backend", "nosql-thing"])
    assert result.exit_code == 2
    assert "unknown store backend" in result.output
