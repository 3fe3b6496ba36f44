"""results.json, report.md and report.html (with charts) for one run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench import charts, concurrency, sweep
from app.bench.analysis import (
    Results,
    analysis,
    fmt_num,
    fmt_us,
    ok_backends,
    p50,
    pair_rows,
    pairs,
    reading,
    targets,
    trips,
    verdict_summary,
    workload_titles,
)
from app.bench.compare import HEADERS as COMPARE_HEADERS
from app.bench.compare import compare, describe, summary
from app.bench.contention import SCENARIOS as CONTENTION_SCENARIOS
from app.bench.document import (
    Block,
    Bullets,
    Figure,
    Heading,
    Para,
    Table,
    to_html,
    to_markdown,
    write_figures,
)

TITLE = "imbucket benchmark: bucket vs row"


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report was written."""

    folder: Path
    results: Path
    markdown: Path
    html: Path


def write(results: Results, folder: Path, previous: Results | None = None) -> ReportFiles:
    """Write results.json, report.md (+ its PNG charts) and report.html into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    results = dict(results)
    results["analysis"] = analysis(results)
    if sweep.series(results):
        titles = workload_titles(results, layouts_only=True)
        results["analysis"]["sweep"] = sweep.analysis(results, titles)
    if concurrency.ran(results):
        results["analysis"]["contention"] = concurrency.analysis(results)
    if previous is not None:
        changes = compare(previous, results)
        results["compare"] = {
            "against": describe(previous),
            "summary": summary(changes),
            "changes": [dict(zip(COMPARE_HEADERS, c.cells(), strict=True)) for c in changes],
        }
    blocks = build(results, previous)
    files = ReportFiles(
        folder, folder / "results.json", folder / "report.md", folder / "report.html"
    )
    files.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    write_figures(blocks, folder)
    files.markdown.write_text(to_markdown(blocks))
    files.html.write_text(to_html(blocks, TITLE))
    return files


def build(results: Results, previous: Results | None = None) -> list[Block]:
    """The report as blocks, rendered alike to Markdown and HTML."""
    blocks: list[Block] = [Heading(1, TITLE), Para(_overview(results))]
    blocks += _emulated(results)
    blocks += _how_to_read()
    blocks += _targets(results)
    blocks += _pairs(results)
    blocks += _sweep(results)
    blocks += _charts(results)
    blocks += _workloads(results)
    blocks += _footprint(results)
    blocks += _contention(results)
    blocks += _backends(results)
    blocks += _parameters(results)
    if previous is not None:
        blocks += _compare(previous, results)
    return blocks


def _overview(results: Results) -> str:
    p, d = results["parameters"], results["parameters"]["dataset"]
    machine, git = results["machine"], results.get("git", {})
    commit = git.get("commit", "")[:10] or "unknown"
    dirty = " (uncommitted changes)" if git.get("dirty") else ""
    return (
        f"Run {results['created']}, scale {p['scale']}: {d['messages']:,} messages in "
        f"{d['conversations']:,} conversations ({d['single_chats']:,} 1:1 chats, "
        f"{d['groups']:,} groups, the largest {d['largest_conversation']:,} messages), "
        f"seed {p['seed']}. Commit {commit}{dirty}. {results['duration_s']:.0f} s on "
        f"{machine.get('cpu_count')} cores ({machine.get('cpu', '?')})."
    )


def _emulated(results: Results) -> list[Block]:
    """A warning when some backends ran on an emulator rather than the engine it speaks for."""
    emulated = [b for b in results["backends"] if b.get("emulated")]
    if not emulated:
        return []
    names = ", ".join(f"{b['label']} on {b['version']}" for b in emulated)
    return [
        Para(
            f"Emulated engine: {names}. An emulator of the server's wire protocol ran these "
            "backends, so their latencies, the bucket/row latency ratios marked (emulated) "
            "and their footprint bytes are not representative of the real server; their "
            "round trips, document and message counts stand (docs/mongo.md)."
        )
    ]


def _how_to_read() -> list[Block]:
    return [
        Heading(2, "How to read this report"),
        Bullets(
            (
                (
                    "Every backend ran the same operations on the same seeded data, "
                    "single-threaded, in one process: each workload on every backend in turn, "
                    "never two at once.",
                ),
                (
                    "bucket/row is the bucket store's median latency divided by the row "
                    "store's on the same engine: below 1 the bucket layout is faster.",
                ),
                (
                    "Round trips are counted at the drivers (SQLAlchemy statements, MongoDB "
                    "commands, Redis commands or pipelines; for memory, repository calls), "
                    "so they do not depend on the machine. Transaction control is not counted.",
                ),
                (
                    "Latencies depend on this machine and on warm caches: read them as ratios "
                    "between backends of one run, not as absolute numbers.",
                ),
                (
                    "Footprint comes from each store's stats(): data and index bytes divided "
                    "by the messages stored.",
                ),
            )
        ),
    ]


def _targets(results: Results) -> list[Block]:
    rows = tuple((t.target, t.scope, t.measured, t.verdict, t.note) for t in targets(results))
    return [
        Heading(2, "Targets"),
        Para("Measured on this run; pass/FAIL lines, never asserted as times in tests."),
        Table(("target", "where", "measured", "result", "note"), rows),
    ]


def _pairs(results: Results) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Bucket vs row, per engine")]
    found = pairs(results)
    if not found:
        return [*blocks, Para("No bucket/row pair ran on the same engine in this run.")]
    titles = workload_titles(results, layouts_only=True)
    for pair in found:
        blocks.append(Heading(3, pair.name))
        blocks.append(Para(verdict_summary(pair, titles)))
        blocks.append(
            Table(
                ("workload", "row p50", "bucket p50", "bucket/row", "round trips row → bucket"),
                tuple(tuple(r) for r in pair_rows(pair, titles)),
            )
        )
        lines = [reading(pair, name, title) for name, title in titles.items()]
        blocks.append(Bullets(tuple(line for line in lines if line is not None)))
    return blocks


def _charts(results: Results) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Charts")]
    chart = charts.ratios(results)
    if chart is not None:
        blocks.append(
            Figure("ratios.png", chart, "bucket/row median latency per workload and engine")
        )
    blocks.append(Figure("latency.png", charts.latency(results), "median latency per operation"))
    blocks.append(
        Figure("round_trips.png", charts.round_trips(results), "round trips per operation")
    )
    return blocks


def _workloads(results: Results) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Workloads")]
    backends = ok_backends(results)
    for workload in results["parameters"]["workloads"]:
        name = workload["name"]
        rows = []
        for b in backends:
            run = b["workloads"].get(name)
            if run is None:
                continue
            lat, rt = run["latency_us"], run["round_trips"]
            rows.append(
                (
                    b["label"],
                    f"{run['ops']:,}",
                    fmt_num(run["ops_per_s"], 0),
                    fmt_num(run["items_per_s"], 0),
                    fmt_us(lat["p50"]),
                    fmt_us(lat["p95"]),
                    fmt_us(lat["p99"]),
                    f"{fmt_num(rt['per_op'])} ({fmt_num(rt['reads_per_op'])}r + "
                    f"{fmt_num(rt['writes_per_op'])}w)",
                    str(rt["max"]),
                    str(run["errors"]),
                )
            )
        if not rows:
            continue
        blocks.append(Heading(3, workload["title"]))
        blocks.append(Para(f"{workload['about']}. {workload['ops']:,} operations per backend."))
        blocks.append(
            Table(
                (
                    "backend",
                    "ops",
                    "ops/s",
                    "items/s",
                    "p50",
                    "p95",
                    "p99",
                    "round trips/op",
                    "max",
                    "errors",
                ),
                tuple(rows),
            )
        )
    errors = [
        (f"{b['label']} · {name}: {count}× {text}",)
        for b in backends
        for name, run in b["workloads"].items()
        for text, count in run.get("error_samples", {}).items()
    ]
    if errors:
        blocks += [Heading(3, "Errors"), Bullets(tuple(errors))]
    return blocks


def _footprint(results: Results) -> list[Block]:
    rows = []
    for b in ok_backends(results):
        for when in ("after_ingest", "end"):
            f: dict[str, Any] = b.get("footprint", {}).get(when, {})
            if "error" in f:
                rows.append((b["label"], when, f["error"], "", "", "", ""))
            elif f:
                rows.append(
                    (
                        b["label"],
                        when.replace("_", " "),
                        f"{f['messages']:,}",
                        f"{f['documents']:,}",
                        fmt_num(f["data_bytes_per_message"], 1),
                        fmt_num(f["index_bytes_per_message"], 2),
                        fmt_num(f["messages_per_document"], 1),
                    )
                )
    blocks: list[Block] = [
        Heading(2, "Storage footprint"),
        Para("From stats(); 'documents' are buckets or rows. 'end' is after every tag workload."),
        Table(
            (
                "backend",
                "when",
                "messages",
                "documents/rows",
                "data B/msg",
                "index B/msg",
                "msgs/doc",
            ),
            tuple(rows),
        ),
    ]
    if rows:
        blocks.append(
            Figure("footprint.png", charts.footprint(results), "bytes per stored message")
        )
    return blocks


def _backends(results: Results) -> list[Block]:
    rows = tuple(
        (
            b["label"],
            b["version"],
            b["url"] or "(in process)",
            b["status"],
            fmt_num(b.get("duration_s"), 1) + " s" if "duration_s" in b else "",
            b.get("reason", ""),
        )
        for b in results["backends"]
    )
    return [
        Heading(2, "Backends"),
        Table(("backend", "engine version", "url", "status", "time", "reason"), rows),
    ]


def _parameters(results: Results) -> list[Block]:
    p, machine, git = results["parameters"], results["machine"], results.get("git", {})
    pairs_ = [
        ("scale", p["scale"]),
        ("seed", str(p["seed"])),
        *((f"dataset {k}", f"{v:,}" if isinstance(v, int) else str(v)) for k, v in
          p["dataset"].items() if k not in {"seed", "traffic"}),
        *((f"traffic {k}", _value(v)) for k, v in p.get("traffic", {}).items()),
        ("operations per read/tag workload", f"{p['scale_detail']['ops']:,}"),
        *((f"machine {k}", str(v)) for k, v in machine.items()),
        *((f"git {k}", str(v)) for k, v in git.items()),
    ]  # fmt: skip
    return [Heading(2, "Parameters and machine"), Table(("parameter", "value"), tuple(pairs_))]


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt_num(v, 3)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(f"{v:,}" for v in value) or "none"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _sweep(results: Results) -> list[Block]:
    found = sweep.series(results)
    if not found:
        return []
    weights = sweep.mix(results)
    titles = workload_titles(results, layouts_only=True)
    traffic = results["parameters"].get("traffic", {}).get("source") or "the built-in traffic"
    mix = ", ".join(f"{titles.get(k, k)} {v / sum(weights.values()):.0%}" for k, v in
                    weights.items() if v)  # fmt: skip
    blocks: list[Block] = [
        Heading(2, "Bucket size sweep"),
        Para(
            f"Every bucket backend ran at {', '.join(map(str, found[0].sizes))} slots per "
            f"bucket on the same seeded data ({traffic}), next to the row layout. The "
            f"weighted cost is the mean p50 of one operation of the traffic's mix ({mix})."
        ),
    ]
    for s in found:
        blocks.append(Heading(3, s.name))
        blocks.append(Para(sweep.reading(s, weights, titles)))
        blocks.append(Table(*_sweep_table(s, titles, weights)))
        blocks.append(
            Figure(
                f"sweep-{s.name.replace('/', '-').replace('+', '-')}.png",
                charts.sweep(results, s, weights),
                f"{s.name}: p50 and round trips per workload, and bytes per message, against "
                "bucket size (dashed: the row layout)",
            )
        )
    return blocks


def _sweep_table(
    s: sweep.Series, titles: dict[str, str], weights: dict[str, float]
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Rows: workloads, the weighted cost and the footprint; columns: row layout, sizes."""
    sizes = [f"{size} slots" for size in s.sizes]
    headers = ("p50 · round trips", *(["row layout"] if s.row else []), *sizes)
    backends = ([s.row] if s.row else []) + list(s.buckets)
    rows = []
    for name, title in titles.items():
        if all(p50(b, name) is None for b in backends):
            continue
        rows.append(
            (title, *(f"{fmt_us(p50(b, name))} · {fmt_num(trips(b, name))}" for b in backends))
        )
    costs = [sweep.row_cost(s, weights)] if s.row else []
    costs += sweep.costs(s, weights)
    rows.append(("this traffic's mix (weighted p50)", *(fmt_us(c) for c in costs)))
    for key, label, digits in (
        ("data_bytes_per_message", "data bytes / message", 0),
        ("index_bytes_per_message", "index bytes / message", 2),
        ("messages_per_document", "messages / bucket or row", 1),
    ):
        rows.append((label, *(fmt_num(sweep.footprint(b).get(key), digits) for b in backends)))
    return headers, tuple(rows)


def _contention(results: Results) -> list[Block]:
    if not concurrency.ran(results):
        return []
    plan = results["parameters"].get("contention", {})
    blocks: list[Block] = [
        Heading(2, "Contention"),
        Para(
            "N workers at once on one backend: threads, and worker processes (each with its "
            "own connections) where another process can open the store, since threads share "
            "one GIL and, on SQLite, one lock. Each run does at most "
            f"{plan.get('ops', '?')} operations split over its workers and stops after "
            f"{plan.get('seconds', '?')} s (the runs it stopped are listed under each table). "
            "Throughput is the operations done ÷ the run's wall time. Conflicts are counted "
            "at the stores, per write: bucket-creation races lost, conditional bucket "
            "updates lost, row upserts collided, and SQL statements the engine asked to "
            "repeat (deadlock, serialization failure, lock timeout, SQLite's 'locked')."
        ),
        Figure(
            "contention.png",
            charts.contention(results),
            "throughput against concurrent workers (log–log; dashed: worker processes)",
        ),
    ]
    for scenario in concurrency.scenarios(results):
        about = next((s.about for s in CONTENTION_SCENARIOS if s.name == scenario), scenario)
        blocks.append(Heading(3, concurrency.SCENARIO_TITLES[scenario]))
        blocks.append(Para(f"{about}. {concurrency.reading(results, scenario)}".strip()))
        blocks.append(
            Table(concurrency.headers(results), tuple(concurrency.rows(results, scenario)))
        )
        early = concurrency.stopped(results, scenario)
        if early:
            blocks.append(Para(early))
    return blocks


def _compare(previous: Results, results: Results) -> list[Block]:
    changes = compare(previous, results)
    counts = summary(changes)
    return [
        Heading(2, "Change since the previous run"),
        Para(
            f"Compared with {describe(previous)}: {counts['compared']} backend × workload "
            f"results, {counts['slower']} slower and {counts['faster']} faster by more than "
            f"10 % (p50), {counts['round_trips_changed']} with other round trips."
        ),
        Table(COMPARE_HEADERS, tuple(c.cells() for c in changes)),
    ]


def load(path: Path) -> Results:
    """Read a results.json written by ``write``."""
    data: Results = json.loads(path.read_text())
    return data
