"""The report's sends against the raw driver: its table, its target line and its measurement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imbucket.app import open_service
from imbucket.bench import send_section
from imbucket.bench.blocks import Bullets, Heading, Table, to_html, to_markdown
from imbucket.bench.results import SendPlan, TargetLine, to_json
from imbucket.bench.targets import targets
from imbucket.domain.model import Draft, SessionType
from tests.unit import bench_fakes
from tests.unit.bench_fakes import typed

SEND = "send through the service ≤ 2× raw driver"


def _cell(scenario: str, callers: int, service: float, raw: float) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "callers": callers,
        "calls": 64,
        "rounds": 3,
        "service_calls_per_s": service,
        "service_p99_ms": 2.5,
        "raw_calls_per_s": raw,
        "raw_p99_ms": 1.25,
    }


def _with_sends(row_worst_raw: float = 1800.0) -> dict[str, Any]:
    """The fake run with the section: sql-row and sql-bucket measured, memory left out."""
    results = bench_fakes.results()
    results["parameters"]["sends"] = {"callers": [1, 8, 64], "calls": 64, "rounds": 3}
    memory, row, bucket = results["backends"][:3]
    memory["sends_missing"] = send_section.unmeasured(typed(results).backends[0])
    row["sends"] = [_cell("many", 1, 1000.0, row_worst_raw), _cell("hot", 8, 500.0, 400.0)]
    bucket["sends"] = [_cell("many", 1, 800.0, 1200.0)]
    return results


def _lines(results: dict[str, Any]) -> dict[str, TargetLine]:
    return {t.scope: t for t in targets(typed(results)) if t.target == SEND}


def test_each_measured_backend_gets_a_table_of_both_arms_and_their_cost_ratio() -> None:
    found = send_section.blocks(typed(_with_sends()))
    assert found[0] == Heading(2, "Sends against the raw driver")
    assert [b.text for b in found if isinstance(b, Heading) and b.level == 3] == [
        "sql-row/sqlite",
        "sql-bucket/sqlite",
    ]
    row_table = next(b for b in found if isinstance(b, Table))
    assert row_table.headers == send_section.HEADERS
    assert row_table.rows == (
        ("many conversations", "1", "1,000", "1,800", "2.5 ms", "1.25 ms", "1.80×"),
        ("one hot group", "8", "500", "400", "2.5 ms", "1.25 ms", "0.80×"),
    )
    bullets = next(b for b in found if isinstance(b, Bullets))
    assert bullets.items == (("memory: in process: no driver to compare with",),)
    markdown = to_markdown(found)
    assert "| one hot group | 8 | 500 | 400 | 2.5 ms | 1.25 ms | 0.80× |" in markdown
    assert "64 calls per arm and round" in markdown and "1, 8 and 64 caller threads" in markdown
    assert '<td class="num">1.80×</td>' in to_html(found, "t")


def test_the_target_is_judged_per_cell_and_a_miss_fails_with_its_number() -> None:
    lines = _lines(_with_sends())
    assert lines["sql-row/sqlite"].verdict == "pass"
    assert lines["memory"].verdict == "n/a" and lines["memory"].note is not None
    assert "point ratios" in (lines["sql-row/sqlite"].note or "")
    lines = _lines(_with_sends(row_worst_raw=2500.0))  # one cell of two at 2.5×
    line = lines["sql-row/sqlite"]
    assert line.verdict == "FAIL"
    assert "many conversations at 1 caller" in line.measured
    assert "raw 2,500 vs service 1,000 calls/s = 2.50×; 1 of 2 cells over 2×" in line.measured
    assert lines["sql-bucket/sqlite"].verdict == "pass"  # 1.50×


def test_a_backend_the_section_should_have_measured_but_did_not_fails() -> None:
    results = _with_sends()
    bucket = results["backends"][2]
    del bucket["sends"]
    bucket["sends_missing"] = "failed: OperationalError: locked"
    line = _lines(results)["sql-bucket/sqlite"]
    assert (line.measured, line.verdict, line.note) == (
        "not measured",
        "FAIL",
        "failed: OperationalError: locked",
    )
    assert "sql-bucket/sqlite: failed: OperationalError: locked" in to_markdown(
        send_section.blocks(typed(results))
    )


def test_an_older_results_json_without_the_section_loads_and_says_not_run() -> None:
    results = typed(bench_fakes.results())  # no "sends" anywhere, as before the section
    assert results.parameters.sends is None and all(not b.sends for b in results.backends)
    assert send_section.blocks(results) == []
    line = next(t for t in targets(results) if t.target == SEND)
    assert (line.scope, line.measured, line.verdict) == ("–", "not run", "n/a")


def test_the_section_round_trips_through_results_json() -> None:
    data = _with_sends()
    again = to_json(typed(data))
    assert again["parameters"]["sends"] == {"callers": [1, 8, 64], "calls": 64, "rounds": 3}
    assert again["backends"][1]["sends"] == data["backends"][1]["sends"]
    assert "sends" not in again["backends"][0]  # an empty list is left out


def test_only_uncached_sql_backends_at_their_default_encoding_are_measured() -> None:
    base = typed(bench_fakes.results()).backends[1]
    found = {
        "sql": send_section.unmeasured(base),
        "mariadb": send_section.unmeasured(_as(base, engine="mariadb")),
        "postgresql": send_section.unmeasured(_as(base, engine="postgresql")),
        "cached": send_section.unmeasured(_as(base, cache="redis")),
        "mongo": send_section.unmeasured(_as(base, family="mongo", engine="mongodb")),
        "variant": send_section.unmeasured(_as(base, encoding="openim")),
    }
    assert found["sql"] is found["mariadb"] is found["postgresql"] is None
    assert found["cached"] is not None and "behind redis" in found["cached"]
    assert found["mongo"] is not None and "mongodb" in found["mongo"]
    assert found["variant"] is not None and "encoding variant" in found["variant"]


def _as(backend: Any, **changes: Any) -> Any:
    data = to_json(backend)
    data.update(changes)
    return typed({**bench_fakes.results(), "backends": [data]}).backends[0]


def test_sends_go_to_conversations_of_their_own(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sends.db'}"
    service = open_service({"store": {"backend": "sql-row", "url": url}})
    try:
        draft = Draft("alice", "hello", "d-1", session_type=SessionType.GROUP, group_id="g1")
        service.send("sg_dataset", [draft])
        runs = send_section.measure(service, SendPlan((1, 2), 3, 3))
        assert [(r.scenario, r.callers, r.calls) for r in runs] == [
            ("many", 1, 3),
            ("hot", 1, 3),
            ("many", 2, 3),
            ("hot", 2, 3),
        ]
        assert all(r.service_calls_per_s > 0 and r.raw_calls_per_s > 0 for r in runs)
        assert service.seqs.max_seq("sg_dataset") == 1
    finally:
        service.close()
