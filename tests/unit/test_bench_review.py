"""`imbucket review`: the memo rendered from hand-made results, the budget, one tiny real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imbucket.app.cli import cli
from imbucket.bench.blocks import to_markdown
from imbucket.bench.memory_budget import (
    CLUSTERED_ROWS,
    EngineRun,
    LayoutRun,
    MemoryResults,
    Pass,
    arms,
)
from imbucket.bench.results import ContentionRun, Latency, MachineLoad
from imbucket.bench.review import budget, memo
from imbucket.bench.review.model import LayoutContention, RegimeRun, Review
from imbucket.bench.review.run import Engine, parse_engines
from imbucket.bench.scale import Point, ScaleResults
from imbucket.domain.errors import ConfigError
from tests.unit.bench_fakes import results, typed

READS = ("pull_latest", "pull_range", "pull_scattered", "delete_for_me")


def _passes(pages: float, p50: int) -> dict[str, Pass]:
    return {name: Pass(10, p50, p50 * 2, pages, pages, 0) for name in READS}


def _memory(engine: str) -> EngineRun:
    return EngineRun(
        engine,
        1_000_000,
        100_000,
        100_000,
        [
            LayoutRun(engine, "sql-row", cold=_passes(6.0, 900), warm=_passes(0.0, 300)),
            LayoutRun(engine, "sql-bucket", cold=_passes(2.0, 500), warm=_passes(0.0, 200)),
        ],
    )


def _point(engine: str, store: str, messages: int, pages: float) -> Point:
    return Point(engine, store, messages, 400.0, 20.0, messages * 20, _passes(pages, 300))


def _contention(engine: str, store: str, done: int) -> LayoutContention:
    run = ContentionRun(
        "hot_group", "threads", 16, done, 160, done, 1.0, float(done), Latency(900, 4000, 9000),
        {}, 0.0, 0,
    )  # fmt: skip
    return LayoutContention(engine, store, [run])


def review(engines: tuple[str, ...] = ("sqlite",), **changes: object) -> Review:
    """A review of engines with every regime complete, unless changes say otherwise."""
    found = Review(list(engines), 600.0, 1_000_000_000, 10_000.0, duration_s=540.0)
    found.in_memory = typed(results(row_latest=200.0, bucket_latest=100.0))
    found.out_of_memory = MemoryResults("small", 42, "10%", 100_000, [_memory(e) for e in engines])
    found.growth = ScaleResults(42, 128 * 2**20)
    for size, pages in ((10_000, 3.0), (100_000, 3.3)):
        for e in engines:
            found.growth.points.append(_point(e, "sql-row", size, pages * 2))
            found.growth.points.append(_point(e, "sql-bucket", size, pages))
    found.contention = [_contention(e, s, 160) for e in engines for s in ("sql-row", "sql-bucket")]
    found.regimes = {r: RegimeRun(r, 100.0, 90.0, "scale small") for r in budget.REGIMES}
    found.load = MachineLoad(2, [0.5, 0.4, 0.3], [0.6, 0.5, 0.4], 0.05, 100.0, False)
    for name, value in changes.items():
        setattr(found, name, value)
    return found


def _first_screen(found: Review) -> list[str]:
    return to_markdown(memo.build(found)).splitlines()[:40]


def test_the_first_screen_answers_every_regime_of_the_engine() -> None:
    screen = "\n".join(_first_screen(review()))
    assert "## sqlite" in screen
    assert "- in memory: buckets faster: one operation of the mix costs buckets 0.50×" in screen
    assert (
        "- out of memory: buckets need fewer pages: read per op cold 2 (bucket) vs 6 (row)"
        in screen
    )
    assert "- at scale: at 100,000 messages buckets need fewer pages: touched per op 3.3" in screen
    assert "×1.10 (bucket), ×1.10 (row)" in screen
    assert "- contention: one hot group at 16 threads, run to completion: 160 ops/s" in screen
    assert "- capacity plan: 1,000,000,000 messages at 10,000 pulls/s: bucket 420 GB disk" in screen
    assert "cut short" not in screen


def test_two_engines_each_get_their_lines_on_the_first_screen() -> None:
    screen = _first_screen(review(("sqlite", "postgresql")))
    for engine in ("sqlite", "postgresql"):
        start = screen.index(f"## {engine}")
        lines = [line for line in screen[start + 1 : start + 8] if line.startswith("- ")]
        assert [line.split(":")[0] for line in lines] == [
            "- in memory",
            "- out of memory",
            "- at scale",
            "- contention",
            "- capacity plan",
        ]
    # postgresql ran no in-memory pair in these results: said, not guessed
    assert any(line.startswith("- in memory: not measured") for line in screen)


def test_a_regime_cut_short_is_marked_on_its_line_in_the_threats_and_in_the_budget() -> None:
    found = review()
    found.regimes["growth"].cut_short.append("100,000 messages: stopped part-way, not kept")
    found.growth.points = [p for p in found.growth.points if p.messages == 10_000]
    text = to_markdown(memo.build(found))
    screen = "\n".join(text.splitlines()[:40])
    assert "- at scale: not measured at two sizes (1 size(s) ran) [cut short" in screen
    assert "Cut short (at scale, its share of 100 s spent): 100,000 messages" in text
    assert "| at scale | 100 s | 90 s | scale small | cut short |" in text


def test_an_unfinished_contention_run_is_not_quoted_and_is_marked() -> None:
    found = review(
        contention=[_contention("sqlite", "sql-row", 82), _contention("sqlite", "sql-bucket", 160)]
    )
    text = to_markdown(memo.build(found))
    assert (
        "- contention: not quoted: the hot group at 16 threads did not finish (82/160 done)" in text
    )
    assert "82/160 (cut short)" in text


def test_the_threats_say_what_this_run_measured_and_left_out() -> None:
    data = results()
    data["backends"][2]["emulated"] = True  # as mongoeco marks its backends
    found = review(in_memory=typed(data))
    found.load = MachineLoad(2, [3.0, 2.0, 1.0], [3.0, 2.0, 1.0], 0.4, 100.0, True)
    text = to_markdown(memo.build(found))
    threats = text.split("## Threats to validity")[1].split("## How the budget")[0]
    assert "other processes used 40% of the CPU time" in threats
    assert "busy machine" in threats
    assert "Cut-short runs: none" in threats
    assert "Emulated engines: sql-bucket/sqlite ran on an emulator" in threats
    assert "Unmeasured workloads in memory: " in threats and "pull_range" in threats
    assert "In-cache regime: the in-memory comparison holds 1,000 messages" in threats
    assert "10,000× beyond the largest size measured" in threats


def test_the_memo_is_written_as_markdown_html_and_json(tmp_path: Path) -> None:
    md, html, data = memo.write(review(), tmp_path)
    assert md.read_text().startswith("# imbucket review")
    assert "<h2>Threats to validity</h2>" in html.read_text()
    found = json.loads(data.read_text())
    assert found["schema"] == "imbucket-review/1"
    assert set(found["regimes"]) == set(budget.REGIMES)
    assert found["growth"]["points"][0]["messages"] == 10_000


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("90s", 90), ("1h", 3600), ("2", 120)])
def test_a_budget_is_a_duration(text: str, seconds: float) -> None:
    assert budget.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "-5m", "10s", ""])
def test_a_budget_that_is_no_duration_or_too_short_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        budget.parse_duration(text)


def test_the_plan_splits_the_budget_up_front_and_sizes_each_regime() -> None:
    ten = budget.plan(600.0, 1)
    assert sum(ten.shares_s.values()) <= 600.0
    assert (ten.in_memory_scale, ten.out_of_memory_scale) == ("small", "small")
    assert ten.growth_sizes[1] == 10 * ten.growth_sizes[0]
    short = budget.plan(40.0, 2)
    assert (short.in_memory_scale, short.out_of_memory_scale, short.growth_sizes[0]) == (
        "tiny",
        "tiny",
        1_000,
    )


def test_engines_are_names_or_urls() -> None:
    url = "postgresql+psycopg://u@127.0.0.1:5432/test"
    assert parse_engines(f"sqlite, {url}") == [Engine("sqlite"), Engine("postgresql", url)]
    with pytest.raises(ConfigError):
        parse_engines("oracle")
    with pytest.raises(ConfigError):
        parse_engines(" , ")


def test_a_review_at_a_tiny_budget_writes_a_memo_that_answers_every_regime(tmp_path: Path) -> None:
    folder = tmp_path / "memo"
    outcome = CliRunner().invoke(
        cli, ["review", "--engines", "sqlite", "--budget", "30s", "--out", str(folder)]
    )
    assert outcome.exit_code == 0, outcome.output
    screen = (folder / "memo.md").read_text().splitlines()[:40]
    for regime in ("in memory", "out of memory", "at scale", "contention", "capacity plan"):
        assert any(line.startswith(f"- {regime}: ") for line in screen), regime
    assert (folder / "memo.html").exists()
    assert (folder / "in-memory" / "report.md").exists()  # the bench's own report, shared
    data = json.loads((folder / "review.json").read_text())
    assert data["in_memory"]["parameters"]["scale"] == "tiny"
    # On a loaded machine the growth regime's share may be spent before its first size: then
    # the review must say so instead of answering from nothing.
    growth = data["regimes"]["growth"]
    assert data["growth"]["points"] or growth["cut_short"], growth


def test_a_regime_that_finishes_early_leaves_its_time_to_the_later_ones() -> None:
    plan = budget.plan(600.0, 1)
    first = plan.share("in_memory", 0.0)
    assert first == pytest.approx(plan.shares_s["in_memory"])
    on_time = plan.share("growth", sum(plan.shares_s[r] for r in budget.REGIMES[:-1]))
    assert on_time == pytest.approx(plan.shares_s["growth"])
    early = plan.share("growth", 60.0)  # the three before it spent a minute in all
    assert early == pytest.approx(600.0 * sum(budget.SHARES.values()) - 60.0)


def test_postgres_lines_say_whether_clustering_the_rows_changes_the_answer() -> None:
    found = review(("postgresql",))
    layouts = found.out_of_memory.engines[0].layouts
    layouts.append(LayoutRun("postgresql", CLUSTERED_ROWS, cold=_passes(2.2, 600)))
    for size, pages in ((10_000, 5.9), (100_000, 6.4)):  # clustered, still twice the buckets'
        found.growth.points.append(_point("postgresql", CLUSTERED_ROWS, size, pages))
    screen = "\n".join(_first_screen(found))
    assert (
        "rows clustered by (conversation, seq): 2.2, bucket/clustered 0.91×, it changes the "
        "answer: pages on par" in screen
    )
    assert "rows clustered by (conversation, seq): 6.4, bucket/clustered 0.52×, the same" in screen


def test_clustered_rows_reading_more_than_the_rows_say_in_which_workload() -> None:
    found = review(("postgresql",))
    layouts = found.out_of_memory.engines[0].layouts
    cold = _passes(5.0, 600)  # the rows read 6.0 in each read workload
    cold["pull_scattered"] = Pass(10, 600, 1_200, 100.0, 100.0, 0)
    layouts.append(LayoutRun("postgresql", CLUSTERED_ROWS, cold=cold))
    screen = "\n".join(_first_screen(found))
    assert "(more than the rows' in pull_scattered), bucket/clustered" in screen


def test_clustered_rows_reading_fewer_pages_carry_no_reason() -> None:
    found = review(("postgresql",))
    layouts = found.out_of_memory.engines[0].layouts
    cold = _passes(5.0, 600)
    cold["pull_scattered"] = Pass(10, 600, 1_200, 7.0, 7.0, 0)  # more here, fewer overall
    layouts.append(LayoutRun("postgresql", CLUSTERED_ROWS, cold=cold))
    assert "more than the rows'" not in "\n".join(_first_screen(found))


def test_only_postgres_measures_clustered_rows() -> None:
    assert CLUSTERED_ROWS in arms("postgresql")
    assert arms("sqlite") == arms("mariadb") == ("sql-row", "sql-bucket")
