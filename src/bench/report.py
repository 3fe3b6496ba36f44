"""results.json, report.md and report.html (with charts) for one run."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from imbucket.bench import (
    amplification,
    answer,
    capacity,
    charts,
    concurrency,
    machine,
    offered_load,
    pages_section,
    send_section,
    sweep,
)
from imbucket.bench.analysis import pairs
from imbucket.bench.blocks import (
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
from imbucket.bench.compare import HEADERS as COMPARE_HEADERS
from imbucket.bench.compare import compare, comparison, name_run, summary
from imbucket.bench.contention import SCENARIOS as CONTENTION_SCENARIOS
from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.readings import pair_rows, reading, verdict_summary
from imbucket.bench.results import (
    Analysis,
    BackendResult,
    Footprint,
    RatioReading,
    RunResults,
    Unsized,
    to_json,
)
from imbucket.bench.targets import targets
from imbucket.bench.traffic import Traffic

TITLE = "imbucket benchmark: bucket vs row"


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """Where a report was written."""

    folder: Path
    results: Path
    markdown: Path
    html: Path


def write(results: RunResults, folder: Path, previous: RunResults | None = None) -> ReportFiles:
    """Write results.json, report.md (+ its PNG charts) and report.html into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    found = analysis(results)
    if sweep.series(results):
        titles = results.parameters.titles(layouts_only=True)
        found = replace(found, sweep=sweep.analysis(results, titles))
    backends = results.ok_backends()
    if concurrency.ran(backends):
        found = replace(found, contention=concurrency.analysis(backends))
    results = replace(results, analysis=found)
    if previous is not None:
        results.compare = comparison(previous, results)
    blocks = build(results, previous)
    files = ReportFiles(
        folder, folder / "results.json", folder / "report.md", folder / "report.html"
    )
    text = json.dumps(to_json(results), indent=1, ensure_ascii=False)
    files.results.write_text(text + "\n")
    write_figures(blocks, folder)
    files.markdown.write_text(to_markdown(blocks))
    files.html.write_text(to_html(blocks, TITLE))
    return files


def build(results: RunResults, previous: RunResults | None = None) -> list[Block]:
    """The report as blocks, rendered alike to Markdown and HTML."""
    blocks: list[Block] = [Heading(1, TITLE), Para(_overview(results))]
    busy = machine.warning(results.load)
    blocks += [Para(busy)] if busy else []
    blocks += _emulated(results)
    blocks += _answers(results)
    blocks += _how_to_read()
    blocks += _pairs(results)
    blocks += _sweep(results)
    blocks += _charts(results)
    blocks += _reference(results)
    blocks += offered_load.blocks(results)
    blocks += _workloads(results)
    blocks += _footprint(results)
    blocks += pages_section.blocks(results)
    blocks += capacity.blocks(results)
    blocks += amplification.blocks(results)
    blocks += _contention(results)
    blocks += send_section.blocks(results)
    blocks += _backends(results)
    blocks += _parameters(results)
    if previous is not None:
        blocks += _compare(previous, results)
    blocks += _targets(results)  # the project's own acceptance, apart from the reviewer's read
    return blocks


def _answers(results: RunResults) -> list[Block]:
    """The answer first: per engine, which layout to choose for this traffic, and why."""
    found = answer.answers(results)
    if not found:
        return []
    trials = results.parameters.trials
    how = (
        f"Each workload ran a warm-up, then {trials} trials with the layouts interleaved; "
        "ratios are bucket/row p50 with a 95 % bootstrap interval (docs/benchmark.md)."
        if trials
        else "Ratios are bucket/row p50 with a 95 % bootstrap interval over operations."
    )
    return [Heading(2, "The answer, per engine"), Para(how), *(Para(a) for a in found)]


def _reference(results: RunResults) -> list[Block]:
    """The in-process memory backend: the reference, kept out of the bucket-vs-row charts."""
    memory = [b for b in results.ok_backends() if b.family == "memory"]
    if not memory:
        return []
    titles = results.parameters.titles()
    rows = tuple(
        (title, *(f"{fmt_us(b.p50(name))} · {fmt_num(b.trips(name))}" for b in memory))
        for name, title in titles.items()
        if any(b.p50(name) is not None for b in memory)
    )
    return [
        Heading(2, "Reference: the in-process memory backend"),
        Para(
            "No engine, no driver: the cost of the service's own Python per operation (p50 · "
            "calls on its repositories). Shown apart, so it does not stretch the charts."
        ),
        Table(("workload", *(b.label for b in memory)), rows),
    ]


def _overview(results: RunResults) -> str:
    p, d = results.parameters, results.parameters.dataset
    machine, git = results.machine, results.git
    commit = (git.commit or "")[:10] or "unknown"
    dirty = " (uncommitted changes)" if git.dirty else ""
    return (
        f"Run {results.created}, scale {p.scale}: {d.messages:,} messages in "
        f"{d.conversations:,} conversations ({d.single_chats:,} 1:1 chats, "
        f"{d.groups:,} groups, the largest {d.largest_conversation:,} messages), "
        f"seed {p.seed}. Commit {commit}{dirty}. {results.duration_s:.0f} s on "
        f"{machine.cpu_count} cores ({machine.cpu or '?'})."
    )


def _emulated(results: RunResults) -> list[Block]:
    """A warning when some backends ran on an emulator rather than the engine it speaks for."""
    emulated = [b for b in results.backends if b.emulated]
    if not emulated:
        return []
    names = ", ".join(f"{b.label} on {b.version}" for b in emulated)
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
                    "single-threaded, in one process, never two at once: each workload's "
                    "first operations as an untimed warm-up, then its timed operations in "
                    "trials, every backend running trial k before any runs trial k + 1. The "
                    "raw-driver arm's pulls alternate with the service's on the same backend, "
                    "so their ratio meets one machine state.",
                ),
                (
                    "bucket/row is the bucket store's median latency divided by the row "
                    "store's on the same engine: below 1 the bucket layout is faster. The "
                    "bracket is its 95 % interval (a bootstrap over trials and their "
                    "operations). The verdict says faster or slower only when the whole "
                    "interval lies outside the on-par band (0.8–1.25), on par when it lies "
                    "inside, inconclusive when it straddles the band's edge.",
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
                (
                    "Write amplification is the bytes each engine wrote to its log (WAL, redo "
                    "log) per operation, read from the engine's own counter around each "
                    "workload.",
                ),
            )
        ),
    ]


def _targets(results: RunResults) -> list[Block]:
    rows = tuple((t.target, t.scope, t.measured, t.verdict, t.note or "") for t in targets(results))
    return [
        Heading(2, "The project's own targets"),
        Para(
            "The project's acceptance targets, measured on this run: pass/FAIL lines, never "
            "asserted as times in tests. A target with a time in it is judged on the 95 % "
            "interval: pass when its upper bound meets the limit, FAIL when its lower bound "
            "misses it, inconclusive in between."
        ),
        Table(("target", "where", "measured", "result", "note"), rows),
    ]


def _pairs(results: RunResults) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Bucket vs row, per engine")]
    found = pairs(results)
    if not found:
        return [*blocks, Para("No bucket/row pair ran on the same engine in this run.")]
    titles = results.parameters.titles(layouts_only=True)
    for pair in found:
        blocks.append(Heading(3, pair.name))
        blocks.append(Para(verdict_summary(pair, titles)))
        blocks.append(
            Table(
                (
                    "workload",
                    "row p50",
                    "bucket p50",
                    "bucket/row [95 %]",
                    "verdict",
                    "round trips row → bucket",
                ),
                tuple(tuple(r) for r in pair_rows(pair, titles)),
            )
        )
        lines = [reading(pair, name, title) for name, title in titles.items()]
        blocks.append(Bullets(tuple(line for line in lines if line is not None)))
    return blocks


def _charts(results: RunResults) -> list[Block]:
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


_WORKLOAD_HEADERS = (
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
)


def _workload_row(b: BackendResult, name: str) -> tuple[str, ...] | None:
    run = b.workloads.get(name)
    if run is None:
        return None
    lat, rt = run.latency_us, run.round_trips
    return (
        b.label,
        f"{run.ops:,}",
        fmt_num(run.ops_per_s, 0),
        fmt_num(run.items_per_s, 0),
        fmt_us(lat.p50),
        fmt_us(lat.p95),
        fmt_us(lat.p99),
        f"{fmt_num(rt.per_op)} ({fmt_num(rt.reads_per_op)}r + {fmt_num(rt.writes_per_op)}w)",
        str(rt.max),
        str(run.errors),
    )


def _planned(backends: list[BackendResult], name: str, ops: int) -> str:
    """How many operations a workload plans per backend, and how many of them the table times."""
    warm = max((b.workloads[name].warmup for b in backends if name in b.workloads), default=0)
    if not warm:
        return f"{ops:,} operations per backend."
    return (
        f"{ops:,} operations per backend: the first {warm:,} an untimed warm-up, "
        f"the {ops - warm:,} after them timed (the table's ops)."
    )


def _workloads(results: RunResults) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Workloads")]
    backends = results.ok_backends()
    for workload in results.parameters.workloads:
        found = [_workload_row(b, workload.name) for b in backends]
        rows = tuple(row for row in found if row is not None)
        if not rows:
            continue
        blocks.append(Heading(3, workload.title))
        blocks.append(Para(f"{workload.about}. {_planned(backends, workload.name, workload.ops)}"))
        blocks.append(Table(_WORKLOAD_HEADERS, rows))
    errors = [
        (f"{b.label} · {name}: {count}× {text}",)
        for b in backends
        for name, run in b.workloads.items()
        for text, count in run.error_samples.items()
    ]
    if errors:
        blocks += [Heading(3, "Errors"), Bullets(tuple(errors))]
    return blocks


def _footprint_row(label: str, when: str, f: Footprint | Unsized) -> tuple[str, ...]:
    if isinstance(f, Unsized):
        return (label, when, f.error, "", "", "", "")
    return (
        label,
        when.replace("_", " "),
        f"{f.messages:,}",
        f"{f.documents:,}",
        fmt_num(f.data_bytes_per_message, 1),
        fmt_num(f.index_bytes_per_message, 2),
        fmt_num(f.messages_per_document, 1),
    )


def _footprint(results: RunResults) -> list[Block]:
    rows = [
        _footprint_row(b.label, when, f)
        for b in results.ok_backends()
        for when, f in (("after_ingest", b.footprint.after_ingest), ("end", b.footprint.end))
        if f is not None
    ]
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


def _backends(results: RunResults) -> list[Block]:
    rows = tuple(
        (
            b.label,
            b.version,
            b.url or "(in process)",
            b.status,
            "" if b.duration_s is None else fmt_num(b.duration_s, 1) + " s",
            b.reason or "",
        )
        for b in results.backends
    )
    return [
        Heading(2, "Backends"),
        Table(("backend", "engine version", "url", "status", "time", "reason"), rows),
    ]


def _parameters(results: RunResults) -> list[Block]:
    p = results.parameters
    dataset, traffic = to_json(p.dataset), to_json(p.traffic) if p.traffic else {}
    pairs_ = [
        ("scale", p.scale),
        ("seed", str(p.seed)),
        *((f"dataset {k}", f"{v:,}" if isinstance(v, int) else str(v)) for k, v in
          dataset.items() if k not in {"seed", "traffic"}),
        *((f"traffic {k}", _value(v)) for k, v in traffic.items()),
        ("operations per read/tag workload", f"{p.scale_detail.ops:,}"),
        *((f"machine {k}", str(v)) for k, v in to_json(results.machine).items()),
        *((f"git {k}", str(v)) for k, v in to_json(results.git).items()),
    ]  # fmt: skip
    return [Heading(2, "Parameters and machine"), Table(("parameter", "value"), tuple(pairs_))]


def _value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt_num(v, 3)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(f"{v:,}" for v in value) or "none"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _sweep(results: RunResults) -> list[Block]:
    found = sweep.series(results)
    if not found:
        return []
    weights = sweep.mix(results)
    titles = results.parameters.titles(layouts_only=True)
    traffic = (results.parameters.traffic or Traffic()).source or "the built-in traffic"
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
    encoding = sweep.encoding_of(s.buckets[0])  # the column says which encoding it is
    sizes = [f"{size} slots ({encoding})" for size in s.sizes]
    headers = ("p50 · round trips", *(["row layout"] if s.row else []), *sizes)
    backends = ([s.row] if s.row else []) + list(s.buckets)
    rows = []
    for name, title in titles.items():
        if all(b.p50(name) is None for b in backends):
            continue
        rows.append(
            (title, *(f"{fmt_us(b.p50(name))} · {fmt_num(b.trips(name))}" for b in backends))
        )
    costs = [sweep.row_cost(s, weights)] if s.row else []
    costs += sweep.costs(s, weights)
    rows.append(("this traffic's mix (weighted p50)", *(fmt_us(c) for c in costs)))
    footprints = sweep.footprints(s)
    for key, label, digits in (
        ("data_bytes_per_message", "data bytes / message", 0),
        ("index_bytes_per_message", "index bytes / message", 2),
        ("messages_per_document", "messages / bucket or row", 1),
    ):
        values = [None if f is None else float(getattr(f, key)) for f in footprints]
        rows.append((label, *(fmt_num(v, digits) for v in values)))
    return headers, tuple(rows)


def _contention(results: RunResults) -> list[Block]:
    backends = results.ok_backends()
    plan = results.parameters.contention
    if not concurrency.ran(backends) or plan is None:
        return []
    blocks: list[Block] = [
        Heading(2, "Contention"),
        Para(
            "N workers at once on one backend: threads, and worker processes (each with its "
            "own connections) where another process can open the store, since threads share "
            "one GIL and, on SQLite, one lock. Each run does at most "
            f"{plan.ops} operations split over its workers and stops after "
            f"{plan.seconds} s (the runs it stopped are listed under each table, with the "
            "operations they completed of those planned: the rest were cut by the deadline). "
            "Throughput is the completed operations ÷ the run's wall time up to its stop; a "
            "stopped run's throughput is that of the operations that fit before the deadline, "
            "and its worker start-up weighs more in it than in a full run. Conflicts are counted "
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
    for scenario in concurrency.scenarios(backends):
        about = next((s.about for s in CONTENTION_SCENARIOS if s.name == scenario), scenario)
        blocks.append(Heading(3, concurrency.SCENARIO_TITLES[scenario]))
        blocks.append(Para(f"{about}. {concurrency.reading(backends, scenario)}".strip()))
        blocks.append(
            Table(concurrency.headers(backends), tuple(concurrency.rows(backends, scenario)))
        )
        early = concurrency.stopped(backends, scenario)
        if early:
            blocks.append(Para(early))
    return blocks


def _compare(previous: RunResults, results: RunResults) -> list[Block]:
    changes = compare(previous, results)
    counts = summary(changes)
    return [
        Heading(2, "Change since the previous run"),
        Para(
            f"Compared with {name_run(previous)}: {counts.compared} backend × workload "
            f"results, {counts.slower} slower and {counts.faster} faster by more than "
            f"10 % (p50), {counts.round_trips_changed} with other round trips."
        ),
        Table(COMPARE_HEADERS, tuple(c.cells() for c in changes)),
    ]


def load(path: Path) -> RunResults:
    """Read a results.json written by ``write``; ValueError when it is not one."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a benchmark results.json: not JSON ({error})") from None
    try:
        return RunResults.from_json(data)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} is not a benchmark results.json: {error!r}") from None


def analysis(results: RunResults) -> Analysis:
    """Ratios, readings and targets (stored in results.json too)."""
    titles = results.parameters.titles(layouts_only=True)
    ratios = []
    for pair in pairs(results):
        for name, title in titles.items():
            lines = reading(pair, name, title)
            if lines is None:
                continue
            found = pair.interval(name)
            ratios.append(
                RatioReading(
                    pair.name,
                    name,
                    round(pair.ratio(name) or 0, 4),
                    [pair.row.trips(name), pair.bucket.trips(name)],
                    list(lines),
                    None if found is None else found.as_list(),
                    pair.verdict(name),
                )
            )
    return Analysis(ratios, targets(results), answers=answer.answers(results) or None)
