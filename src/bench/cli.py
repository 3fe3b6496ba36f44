"""The benchmark lab's commands: bench, profile and compare (added to the imbucket CLI).

Registered through the ``imbucket.commands`` entry point; the lab's own dependencies (the
``[bench]`` extra) are imported by the commands only, so the CLI starts without them.
"""

from __future__ import annotations

import datetime as dt
from contextlib import ExitStack
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from imbucket.app import open_service
from imbucket.app.cli import console, refuse
from imbucket.app.settings import load_settings
from imbucket.domain.errors import ConfigError

if TYPE_CHECKING:
    from imbucket.bench.results import RunResults
    from imbucket.bench.runner import Options as RunnerOptions
    from imbucket.bench.spec import BackendSpec


class ScaleName(StrEnum):
    """Dataset sizes of ``imbucket bench``."""

    tiny = "tiny"
    small = "small"
    medium = "medium"
    large = "large"


# bench's two repeatable options, named here so that bench's signature stays readable.
_BackendOption = Annotated[
    list[str] | None,
    typer.Option(
        "--backend",
        "-b",
        help="ID[+redis][@URL], repeatable; e.g. sql-row@postgresql+psycopg://u@host/db, "
        "memory+redis. Default: memory, sql-row and sql-bucket on a temporary SQLite file.",
    ),
]
_WorkloadOption = Annotated[
    list[str] | None,
    typer.Option(
        "--workload",
        "-w",
        help="run only these workloads (ingest always runs: it loads the data)",
    ),
]


_ConfigOption = Annotated[
    Path | None, typer.Option(help="TOML/JSON file listing backends (see docs/benchmark.md)")
]

_ScaleOption = Annotated[ScaleName | None, typer.Option(help="dataset size (default small)")]

_SeedOption = Annotated[int | None, typer.Option(help="dataset seed (default 42)")]

_OutOption = Annotated[
    Path | None, typer.Option(help="report folder (default reports/<timestamp>/)")
]

_CompareOption = Annotated[
    Path | None, typer.Option(help="an earlier results.json to compare this run with")
]

_RedisUrlOption = Annotated[
    str, typer.Option(help="Redis URL of +redis backends (default: settings cache.url)")
]

_BucketSizeOption = Annotated[
    str | None,
    typer.Option(
        "--bucket-size",
        help="sweep: run every bucket backend at each of these sizes, e.g. 20,50,100,200,500",
    ),
]

_TrafficOption = Annotated[
    Path | None,
    typer.Option(help="TOML/JSON file with a [traffic] table (see docs/benchmark.md)"),
]

_ContentionOption = Annotated[
    bool,
    typer.Option(
        "--contention/--no-contention",
        help="run the contention workloads (N concurrent workers)",
    ),
]

_SendsOption = Annotated[
    bool,
    typer.Option(
        "--sends/--no-sends",
        help="measure sends through the service against the raw driver (1, 8 and 64 threads)",
    ),
]

_TrialsOption = Annotated[
    int,
    typer.Option(min=1, help="split each workload's timed operations into K trials"),
]

_RateOption = Annotated[
    str,
    typer.Option(
        help="offered-load rates: % of closed-loop throughput or ops/s, e.g. 50%,70%,90% "
        "or 200,400; 'off': no offered-load section"
    ),
]

_MemoryBudgetOption = Annotated[
    str | None,
    typer.Option(
        "--memory-budget",
        help="instead of the report: each engine's buffer at this budget (10% of the "
        "dataset's bytes, or a size like 64MB), pages read and p50 cold and warm",
    ),
]

_ScalesOption = Annotated[
    str | None,
    typer.Option(help="instead of the report: a scale curve at these sizes, e.g. 10k,100k,1m,10m"),
]

_EnginesOption = Annotated[
    str,
    typer.Option(
        help="engines of --memory-budget and --scales (PostgreSQL and MariaDB run as "
        "private instances the bench starts and stops)"
    ),
]


def bench(
    backend: _BackendOption = None,
    config: _ConfigOption = None,
    scale: _ScaleOption = None,
    seed: _SeedOption = None,
    out: _OutOption = None,
    compare: _CompareOption = None,
    redis_url: _RedisUrlOption = "",
    workload: _WorkloadOption = None,
    bucket_size: _BucketSizeOption = None,
    traffic: _TrafficOption = None,
    contention: _ContentionOption = True,
    sends: _SendsOption = True,
    trials: _TrialsOption = 5,
    rate: _RateOption = "50%,70%,90%",
    memory_budget: _MemoryBudgetOption = None,
    scales: _ScalesOption = None,
    engines: _EnginesOption = "postgresql,mariadb,sqlite",
) -> None:
    """Run the same workloads on every chosen backend and write a bucket-vs-row report.

    Each backend's settings are merged over IMBUCKET_CONFIG and the IMBUCKET_* variables
    (e.g. IMBUCKET_LIMITS__MAX_CONTENT_BYTES=65536). A run in which every backend is skipped
    says why on stderr, writes no report and exits 1.
    """
    if scales is not None:
        _scale_run(scales, engines, memory_budget, seed, out)
        return
    if memory_budget is not None:
        _memory_run(memory_budget, engines, scale, seed, out)
        return
    try:
        specs, options, previous = _bench_plan(
            backend, config, scale, seed, compare, redis_url, workload, bucket_size, traffic
        )
    except (OSError, ValueError) as error:
        refuse("bench", error, 2)
    chosen = replace(options, contention=contention, sends=sends, trials=trials)
    _report_run(specs, chosen, previous, rate, out)


def _report_run(
    specs: list[BackendSpec],
    options: RunnerOptions,
    previous: RunResults | None,
    rate: str,
    out: Path | None,
) -> None:
    """``bench``'s report: run the backends, write the report, print its tables."""
    from imbucket.bench import console as bench_console
    from imbucket.bench import offered_load, report, runner

    try:
        rates = () if rate.strip().lower() == "off" else offered_load.parse_rates(rate)
    except offered_load.RateError as error:
        refuse("bench", error, 2)
    options = replace(options, rates=rates)
    with bench_console.RichObserver(Console(stderr=True)) as observer:
        results = runner.run(specs, options, observer)
    if not any(b.ok for b in results.backends):  # the observer said why each was skipped
        labels = ", ".join(b.label for b in results.backends)
        typer.echo(f"imbucket bench: every backend was skipped ({labels}); no report", err=True)
        raise typer.Exit(1)
    folder = out or Path("reports") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    files = report.write(results, folder, previous)
    _print_bench(results, previous)
    console.print(f"report: {files.html}")
    console.print(f"        {files.markdown}")
    console.print(f"        {files.results}")


def _memory_run(
    budget: str, engines: str, scale: ScaleName | None, seed: int | None, out: Path | None
) -> None:
    """``bench --memory-budget``: private instances at the budget, cold and warm passes."""
    from imbucket.bench import console as bench_console
    from imbucket.bench import instances, memory_budget

    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    instances.stop_on_sigterm()
    with bench_console.RichObserver(Console(stderr=True)) as observer:
        results = memory_budget.run(
            chosen,
            memory_budget.parse_budget(budget),
            scale.value if scale else "small",
            42 if seed is None else seed,
            observer,
        )
    folder = out or Path("reports") / dt.datetime.now().strftime("memory-%Y%m%d-%H%M%S")
    text, data = memory_budget.write(results, folder)
    console.print(memory_budget.markdown(results), markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {text}\n        {data}")


def _scale_run(
    sizes: str, engines: str, budget: str | None, seed: int | None, out: Path | None
) -> None:
    """``bench --scales``: both SQL layouts of each engine loaded at each size."""
    from imbucket.bench import console as bench_console
    from imbucket.bench import instances, memory_budget, scale

    chosen = tuple(e.strip() for e in engines.split(",") if e.strip())
    counts = scale.parse_scales(sizes)
    instances.stop_on_sigterm()
    size = memory_budget.parse_budget(budget).size if budget else None
    buffer = size or 128 * 1024 * 1024
    folder = out or Path("reports") / dt.datetime.now().strftime("scale-%Y%m%d-%H%M%S")
    with ExitStack() as stack, bench_console.RichObserver(Console(stderr=True)) as observer:
        urls = {}
        for engine in chosen:
            if engine == "sqlite":
                urls[engine] = ""
                continue
            instance = instances.start(engine, buffer)
            stack.callback(instance.close)
            urls[engine] = instance.url
        seed = 42 if seed is None else seed
        results = scale.run(
            urls, counts, seed, buffer, observer, lambda found: scale.write(found, folder)
        )
    files = scale.write(results, folder)
    console.print(scale.markdown(results), markup=False, highlight=False, soft_wrap=True)
    console.print("report: " + "\n        ".join(str(f) for f in files))


def _bench_plan(
    backend: list[str] | None,
    config: Path | None,
    scale: ScaleName | None,
    seed: int | None,
    compare: Path | None,
    redis_url: str,
    workload: list[str] | None,
    bucket_size: str | None,
    traffic: Path | None,
) -> tuple[list[BackendSpec], RunnerOptions, RunResults | None]:
    """The backends, run options and earlier results a ``bench`` command line asks for."""
    from imbucket.bench import report, runner, spec
    from imbucket.bench.traffic import load_traffic
    from imbucket.bench.workloads import WORKLOAD_NAMES

    load_settings()  # a settings mistake is refused here, not once per skipped backend
    file = spec.load_config(config, redis_url) if config else None
    specs = [spec.parse_backend(text, redis_url) for text in backend or ()]
    specs += list(file.backends) if file else []
    if not specs:
        specs = [spec.parse_backend(text) for text in spec.DEFAULT_BACKENDS]
    sizes = spec.parse_sizes(bucket_size) if bucket_size else (file.bucket_sizes if file else ())
    specs = spec.sweep(specs, sizes) if sizes else specs
    shape = load_traffic(traffic, WORKLOAD_NAMES) if traffic else (file.traffic if file else None)
    unknown = set(workload or ()) - set(WORKLOAD_NAMES)
    if unknown:
        raise ConfigError(f"unknown workloads {sorted(unknown)}; known: {WORKLOAD_NAMES}")
    previous = report.load(compare) if compare else None
    options = runner.Options(
        scale=(scale.value if scale else None) or (file and file.scale) or "small",
        seed=seed if seed is not None else (file.seed if file and file.seed is not None else 42),
        workloads=tuple(workload or ()),
        traffic=shape,
        bucket_sizes=sizes,
    )
    return specs, options, previous


def _print_bench(results: RunResults, previous: RunResults | None) -> None:
    """The run's tables, verdicts, targets, comparison and skipped backends on the console."""
    from imbucket.bench import console as bench_console
    from imbucket.bench.compare import compare as compare_runs
    from imbucket.bench.compare import name_run

    console.print(bench_console.summary_table(results))
    for line in [*bench_console.verdicts(results), *bench_console.contention_lines(results)]:
        console.print(escape(line))
    console.print(bench_console.targets_table(results))
    if previous is not None:
        console.print(
            bench_console.compare_table(compare_runs(previous, results), name_run(previous))
        )
    for b in results.backends:
        if not b.ok:
            console.print(f"[yellow]skipped[/] {escape(b.label)}: {escape(b.reason or '')}")


def profile(
    config: Annotated[
        Path, typer.Option(help="TOML/JSON file naming the store and its conversations")
    ],
    out: Annotated[
        Path | None, typer.Option(help="where to write the [traffic] table (default: print it)")
    ] = None,
) -> None:
    """Derive a [traffic] table for `imbucket bench --traffic` from an existing store.

    The store's settings are merged over IMBUCKET_CONFIG and the IMBUCKET_* variables
    (e.g. IMBUCKET_STORE__BACKEND=sql-row).
    """
    from imbucket.bench import profile as profiling
    from imbucket.bench.traffic import to_toml

    request = profiling.load_request(config)
    with open_service(request.store_config()) as service:
        found = profiling.profile(service, request)
    text = to_toml(found.traffic(request.messages), found.summary())
    if out is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        out.write_text(text)
        console.print(f"{found.summary()}\nwrote {out}")


def compare_command(
    old: Annotated[Path, typer.Argument(help="the earlier results.json")],
    new: Annotated[Path, typer.Argument(help="the later results.json")],
) -> None:
    """Show the change between two benchmark runs."""
    from imbucket.bench import console as bench_console
    from imbucket.bench import report
    from imbucket.bench.compare import compare as compare_runs
    from imbucket.bench.compare import name_run

    try:
        before, after = report.load(old), report.load(new)
    except (OSError, ValueError) as error:
        refuse("compare", error, 2)
    console.print(bench_console.compare_table(compare_runs(before, after), name_run(before)))


def plan_command(
    results: Annotated[Path, typer.Argument(help="a benchmark's results.json")],
    messages: Annotated[int, typer.Option(min=1, help="messages stored")] = 1_000_000_000,
    pulls_per_s: Annotated[
        float,
        typer.Option(min=0.001, help="pulls per second; the other operations keep the mix's share"),
    ] = 10_000.0,
) -> None:
    """Project disk, RAM for resident indexes and pages/s for a target from a run's counts."""
    from rich.table import Table

    from imbucket.bench import capacity, report

    try:
        found = report.load(results)
    except (OSError, ValueError) as error:
        refuse("plan", error, 2)
    target = capacity.Target(messages, pulls_per_s)
    table = Table(*capacity.HEADERS, title="capacity plan (a projection)")
    for row in capacity.rows(capacity.plan(found, target)):
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    console.print(escape(f"formulas: {capacity.FORMULAS}"))


def herd_command(
    backend: Annotated[str, typer.Option(help="store backend, e.g. sql-bucket")] = "sql-bucket",
    url: Annotated[str, typer.Option(help="store URL (default: the backend's own)")] = "",
    members: Annotated[int, typer.Option(min=2, help="members pulling at once")] = 64,
    rounds: Annotated[int, typer.Option(min=1, help="new messages, one herd each")] = 20,
    api: Annotated[str, typer.Option(help="threads or asyncio")] = "threads",
) -> None:
    """N members pull a group's new message at once: coalesced pulls against pulls alone."""
    from rich.table import Table

    from imbucket.bench import herd

    if api not in herd.APIS:
        refuse("herd", ValueError(f"--api must be one of {', '.join(herd.APIS)}"), 2)
    arms = herd.run({"backend": backend, "url": url}, members, rounds, api)
    table = Table("api", "arm", "members", "statements per herd", "herd ms (median)", "vs alone")
    alone = next(arm for arm in arms if arm.arm == "alone").median_seconds
    for arm in arms:
        ratio = f"{arm.median_seconds / alone:.2f}x"
        ms = f"{arm.median_seconds * 1000:.1f}"
        table.add_row(api, arm.arm, str(members), f"{arm.median_statements:g}", ms, ratio)
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add bench, review, profile, compare, plan and herd to the imbucket command line."""
    from imbucket.bench.review.command import review_command

    app.command("herd")(herd_command)
    app.command()(bench)
    app.command("review")(review_command)
    app.command()(profile)
    app.command("compare")(compare_command)
    app.command("plan")(plan_command)
