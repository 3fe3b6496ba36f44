"""The bucket-size sweep: its options, the backends it expands to, and the generated reading."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imbucket.bench import report, sweep
from imbucket.bench.analysis import pairs
from imbucket.bench.spec import load_config, parse_backend, parse_sizes
from imbucket.bench.spec import sweep as expand
from imbucket.domain.budget import DEFAULT_MAX_BUCKET_BYTES
from imbucket.domain.errors import ConfigError
from tests.unit import bench_fakes
from tests.unit.bench_fakes import typed


def test_sizes_parse_from_a_list_distinct_and_ascending() -> None:
    assert parse_sizes("500, 20,100,20") == (20, 100, 500)
    assert parse_sizes([50, "100"]) == (50, 100)


@pytest.mark.parametrize(
    "text", ["", "20,,50", "0", "-5", "ten", "2.5", "1,2,3,4,5,6,7,8,9,10,11,12,13"]
)
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_sizes(text)


def test_a_boolean_is_not_a_size() -> None:
    with pytest.raises(ConfigError):
        parse_sizes([True])


def test_every_bucket_backend_runs_at_each_size_and_row_backends_once() -> None:
    specs = [parse_backend(t) for t in ("memory", "sql-row", "sql-bucket")]
    labels = [s.label for s in expand(specs, (20, 500))]
    assert labels == [
        "memory[20]",
        "memory[500]",
        "sql-row/sqlite",
        "sql-bucket/sqlite[20]",
        "sql-bucket/sqlite[500]",
    ]


def test_a_swept_size_sets_the_store_config_with_bytes_per_slot_kept() -> None:
    small, big = expand([parse_backend("sql-bucket")], (20, 500))
    assert small.config()["store"]["bucket_size"] == 20
    assert small.config()["store"]["max_bucket_bytes"] == DEFAULT_MAX_BUCKET_BYTES
    assert big.config()["store"]["max_bucket_bytes"] == DEFAULT_MAX_BUCKET_BYTES * 5
    assert "bucket_size" not in parse_backend("sql-bucket").config()["store"]


def test_the_config_file_may_hold_sizes_and_traffic_without_backends(tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text("bucket_sizes = [100, 20]\n[traffic]\ngroup_share = 0.5\n")
    config = load_config(path)
    assert config.backends == () and config.bucket_sizes == (20, 100)
    assert config.traffic is not None and config.traffic.group_share == 0.5
    path.write_text("bucket_sizes = [0]\n")
    with pytest.raises(ConfigError):
        load_config(path)


def _at(size: int, latest: float, scattered: float, data: float) -> dict[str, Any]:
    workloads = {
        "pull_latest": bench_fakes.run(latest),
        "pull_scattered": bench_fakes.run(scattered),
        "ingest": bench_fakes.run(100.0, per_op=3.0),
    }
    b = bench_fakes.backend("sql-bucket", "sqlite", workloads, index_per_msg=2.0)
    b["label"] += f"[{size}]"
    b["bucket_size"] = size
    b["footprint"]["after_ingest"]["data_bytes_per_message"] = data
    return b


def swept(points: list[tuple[int, float, float, float]]) -> dict[str, Any]:
    results = bench_fakes.results()
    row = results["backends"][1]
    row["workloads"] = {
        "pull_latest": bench_fakes.run(300.0),
        "pull_scattered": bench_fakes.run(100.0),
        "ingest": bench_fakes.run(100.0),
    }
    results["backends"] = [row] + [_at(*p) for p in points]
    results["parameters"]["workloads"] = [
        {"name": n, "title": n, "about": n, "ops": 10}
        for n in ("ingest", "pull_latest", "pull_scattered")
    ]
    mix = {"pull_latest": 0.5, "pull_scattered": 0.25, "ingest": 0.25}
    results["parameters"]["traffic"] = {"mix": mix, "source": "team.toml"}
    results["parameters"]["bucket_sizes"] = [p[0] for p in points]
    return results


TITLES = {"ingest": "ingest", "pull_latest": "pull_latest", "pull_scattered": "scattered"}


def test_the_reading_finds_the_bend_the_best_size_and_why() -> None:
    # weighted cost: (0.5 latest + 0.25 scattered + 0.25 × 100) at 20, 50, 100, 200
    results = swept([(20, 400, 100, 300), (50, 200, 100, 400), (100, 190, 110, 500),
                     (200, 190, 400, 900)])  # fmt: skip
    (s,) = sweep.series(typed(results))
    assert s.sizes == (20, 50, 100, 200) and s.row is not None
    weights = sweep.mix(typed(results))
    assert [round(c or 0) for c in sweep.costs(s, weights)] == [250, 150, 148, 220]
    assert sweep.bend(s.sizes, [250, 150, 148, 220]) == 50
    text = sweep.reading(s, weights, TITLES)
    assert "bends at 50" in text and "cut the cost by 40%" in text
    assert "Best for this traffic: 50 (on par within 5 %: 100; 50 stores the fewest" in text
    assert "The row layout takes 200 µs for the same mix: buckets of 50 are 1.33× faster" in text
    assert "pull_latest (50% of operations) gets 2.1× faster from 20 to 200" in text
    assert "data bytes per message go from 300 to 900" in text


def test_a_curve_still_falling_or_flat_from_the_start_says_so() -> None:
    assert sweep.bend((20, 50, 100), [300.0, 200.0, 100.0]) is None
    # small steps that add up still count: 124 → 113 is 9 %, so no bend before 500
    assert sweep.bend((20, 50, 100, 200, 500), [124.0, 121.0, 120.0, 119.0, 113.0]) is None
    assert sweep.bend((20, 50, 100), [100.0, 99.0, 98.0]) == 20
    falling = swept([(20, 400, 100, 300), (50, 300, 100, 400), (100, 100, 100, 500)])
    (s,) = sweep.series(typed(falling))
    assert "keeps falling up to 100" in sweep.reading(s, sweep.mix(typed(falling)), TITLES)
    flat = swept([(20, 100, 100, 300), (50, 100, 100, 400), (100, 300, 100, 500)])
    (s,) = sweep.series(typed(flat))
    text = sweep.reading(s, sweep.mix(typed(flat)), TITLES)
    assert (
        "Bigger buckets do not pay here" in text
        and "Best for this traffic: 20 (on par within 5 %: 50;" in text
    )


def test_the_bucket_vs_row_section_takes_the_size_nearest_100() -> None:
    results = swept([(20, 400, 100, 300), (90, 200, 100, 400), (500, 190, 110, 500)])
    (pair,) = pairs(typed(results))
    assert pair.bucket.bucket_size == 90


def test_the_report_gains_a_sweep_section_with_charts(tmp_path: Path) -> None:
    results = swept([(20, 400, 100, 300), (50, 200, 100, 400), (100, 190, 110, 500)])
    files = report.write(typed(results), tmp_path)
    markdown = files.markdown.read_text()
    assert "## Bucket size sweep" in markdown and "### sql/sqlite" in markdown
    headers = "| p50 · round trips | row layout | 20 slots (compact) | 50 slots (compact) |"
    assert headers in markdown
    assert markdown.count("| pull ≤ 1 round trip |") == 2  # row, and bucket at 100
    assert (tmp_path / "sweep-sql-sqlite.png").read_bytes()[:4] == b"\x89PNG"
    assert "Bucket size sweep" in files.html.read_text()


def test_without_a_sweep_the_report_has_no_sweep_section(tmp_path: Path) -> None:
    files = report.write(typed(bench_fakes.results()), tmp_path)
    assert "Bucket size sweep" not in files.markdown.read_text()
    assert "Contention" not in files.markdown.read_text()


def test_each_encoding_of_a_sweep_is_a_series_with_its_own_best_size() -> None:
    results = swept([(20, 400, 100, 300), (50, 200, 100, 400)])
    for size, latest in ((20, 150.0), (50, 300.0)):
        openim = _at(size, latest, 100, 900)
        openim["encoding"] = "openim"
        openim["label"] += "[openim]"
        results["backends"].append(openim)
    compact, openim_series = sweep.series(typed(results))
    assert compact.name == "sql/sqlite [compact]" and compact.sizes == (20, 50)
    assert openim_series.name == "sql/sqlite [openim]" and openim_series.sizes == (20, 50)
    weights = sweep.mix(typed(results))
    assert "Best for this traffic: 50" in sweep.reading(compact, weights, TITLES)
    assert "Best for this traffic: 20" in sweep.reading(openim_series, weights, TITLES)
