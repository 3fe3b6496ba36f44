"""The imbucket command line: bench, compare, demo, inspect, backends."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adapters.codec import slot_to_doc
from app import open_container, open_service
from app.backends import plugin_names
from app.demo import DEMO_CONVERSATION, USERS, cell_text, play, views
from app.service import MessageService
from app.settings import CACHE_BACKENDS, STORE_BACKENDS, load_settings
from domain.errors import ConfigError, ImbucketError
from domain.projection import MessageView, Tombstone

if TYPE_CHECKING:  # the benchmark is imported by its commands only
    from app.bench.results import RunResults
    from app.bench.runner import Options as RunnerOptions
    from app.bench.spec import BackendSpec

cli = typer.Typer(
    help="imbucket: an IM message store on OpenIM's bucket layout.", no_args_is_help=True
)
console = Console(width=120) if not Console().is_terminal else Console()

_STYLES = {
    "deleted": "red",
    "cleared": "yellow",
    "purged": "magenta",
    "missing": "bright_black",
    "unallocated": "bright_black",
}


def _open() -> MessageService:
    try:
        return open_service()
    except ImbucketError as error:
        console.print(f"[red]cannot open the store:[/] {error}")
        raise typer.Exit(2) from None


def _backend_line() -> str:
    settings = load_settings()
    url = f" @ {escape(_redacted(settings.store.url))}" if settings.store.url else ""
    return f"store [bold]{settings.store.backend}[/]{url}, cache [bold]{settings.cache.backend}[/]"


def _redacted(url: str) -> str:
    """The URL without its password, fit to print."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@cli.command()
def demo() -> None:
    """Play the article's scenario and show what each user sees for the same seqs."""
    with _open() as service:
        replayed = play(service)
        result = views(service, replayed)
        table = Table(
            title=f"{DEMO_CONVERSATION}: one stored fact, one view per user",
            caption=f"doc:slot = bucket {DEMO_CONVERSATION}:<doc> and its slot",
        )
        table.add_column("seq", justify="right")
        table.add_column("doc:slot")
        for user in USERS:
            table.add_column(user + (" (owner)" if user == "olivia" else ""))
        for row, seq in enumerate(result.seqs):
            location = f"{service.layout.doc_index(seq)}:{service.layout.slot_index(seq)}"
            cells = []
            for user in USERS:
                entry = result.views[user][row]
                style = "cyan" if isinstance(entry, MessageView) and entry.revoked else ""
                if isinstance(entry, Tombstone):
                    style = _STYLES[entry.reason.value]
                text = escape(cell_text(entry))
                cells.append(f"[{style}]{text}[/]" if style else text)
            table.add_row(str(seq), location, *cells)
        console.print(_backend_line())
        if not replayed:
            console.print("(the demo conversation was already stored here; showing it as it is)")
        console.print(table)
        console.print(
            "dave cleared his history after seq 4; bob deleted seq 5 for himself; carol revoked "
            "seq 6; seq 7 was allocated but never stored; olivia purged seq 151; "
            "153 is beyond max_seq."
        )


@cli.command()
def inspect(
    conversation: Annotated[str, typer.Argument(help="conversation id")],
    seq: Annotated[int, typer.Argument(help="message seq")],
) -> None:
    """Show where a seq lives (doc_id, slot) and the raw slot stored there."""
    with _open() as service:
        if conversation == DEMO_CONVERSATION and load_settings().store.backend == "memory":
            play(service)
            console.print("(memory backend keeps nothing between runs: the demo was played first)")
        try:
            found = service.inspect(conversation, seq)
        except ImbucketError as error:
            console.print(f"[red]{type(error).__name__}:[/] {error}")
            raise typer.Exit(2) from None
        console.print(_backend_line())
        console.print(f"conversation  {found.conversation_id}  (max_seq {found.max_seq})")
        console.print(f"seq           {found.seq}")
        console.print(f"doc index     {found.doc_index}   = (seq - 1) // {service.layout.size}")
        console.print(f"slot index    {found.slot_index}   = (seq - 1) % {service.layout.size}")
        console.print(f"doc_id        {found.doc_id}")
        if found.slot is None:
            console.print("stored slot   (nothing stored: an empty slot)")
        else:
            console.print("stored slot")
            console.print_json(json.dumps(slot_to_doc(found.slot)))


@cli.command()
def backends() -> None:
    """List the backends (plugins too) and check that the configured one is reachable."""
    settings = load_settings()
    table = Table(title="backends")
    table.add_column("kind")
    table.add_column("id")
    table.add_column("configured")
    for name in STORE_BACKENDS:
        table.add_row("store", name, "yes" if name == settings.store.backend else "")
    for name in plugin_names():
        table.add_row("store (plugin)", name, "yes" if name == settings.store.backend else "")
    for name in CACHE_BACKENDS:
        table.add_row("cache", name, "yes" if name == settings.cache.backend else "")
    console.print(table)
    try:
        container = open_container()
        with container.service() as service:
            service.max_seq("imbucket-healthcheck")
            version = container.version()
        suffix = f" ({escape(version)})" if version else ""
        console.print(f"[green]reachable[/]: {_backend_line()}{suffix}")
    except ImbucketError as error:
        console.print(f"[red]unreachable[/]: {_backend_line()}: {escape(str(error))}")
        raise typer.Exit(1) from None


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


@cli.command()
def bench(
    backend: _BackendOption = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML/JSON file listing backends (see docs/benchmark.md)")
    ] = None,
    scale: Annotated[ScaleName | None, typer.Option(help="dataset size (default small)")] = None,
    seed: Annotated[int | None, typer.Option(help="dataset seed (default 42)")] = None,
    out: Annotated[
        Path | None, typer.Option(help="report folder (default reports/<timestamp>/)")
    ] = None,
    compare: Annotated[
        Path | None, typer.Option(help="an earlier results.json to compare this run with")
    ] = None,
    redis_url: Annotated[
        str, typer.Option(help="Redis URL of +redis backends (default: settings cache.url)")
    ] = "",
    workload: _WorkloadOption = None,
    bucket_size: Annotated[
        str | None,
        typer.Option(
            "--bucket-size",
            help="sweep: run every bucket backend at each of these sizes, e.g. 20,50,100,200,500",
        ),
    ] = None,
    traffic: Annotated[
        Path | None,
        typer.Option(help="TOML/JSON file with a [traffic] table (see docs/benchmark.md)"),
    ] = None,
    contention: Annotated[
        bool, typer.Option(help="run the contention workloads (N concurrent workers)")
    ] = True,
) -> None:
    """Run the same workloads on every chosen backend and write a bucket-vs-row report."""
    from app.bench import console as bench_console
    from app.bench import report, runner

    try:
        specs, options, previous = _bench_plan(
            backend, config, scale, seed, compare, redis_url, workload, bucket_size, traffic
        )
    except (ImbucketError, OSError, ValueError) as error:
        console.print(f"[red]bench:[/] {error}")
        raise typer.Exit(2) from None
    options = replace(options, contention=contention)
    with bench_console.RichObserver(Console(stderr=True)) as observer:
        results = runner.run(specs, options, observer)
    folder = out or Path("reports") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    files = report.write(results, folder, previous)
    _print_bench(results, previous)
    console.print(f"report: {files.html}")
    console.print(f"        {files.markdown}")
    console.print(f"        {files.results}")
    if all(not b.ok for b in results.backends):
        raise typer.Exit(1)


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
    from app.bench import report, runner, spec
    from app.bench.traffic import load_traffic
    from app.bench.workloads import WORKLOAD_NAMES

    file = spec.load_config(config, redis_url) if config else None
    specs = [spec.parse_backend(text, redis_url) for text in backend or ()]
    specs += list(file.backends) if file else []
    if not specs:
        specs = [spec.parse_backend(text) for text in spec.DEFAULT_BACKENDS]
    sizes = spec.parse_sizes(bucket_size) if bucket_size else (file.bucket_sizes if file else ())
    specs = spec.sweep(specs, sizes) if sizes else specs
    shape = load_traffic(traffic) if traffic else (file.traffic if file else None)
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
    from app.bench import console as bench_console
    from app.bench.compare import compare as compare_runs
    from app.bench.compare import name_run

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


@cli.command()
def profile(
    config: Annotated[
        Path, typer.Option(help="TOML/JSON file naming the store and its conversations")
    ],
    out: Annotated[
        Path | None, typer.Option(help="where to write the [traffic] table (default: print it)")
    ] = None,
) -> None:
    """Derive a [traffic] table for `imbucket bench --traffic` from an existing store."""
    from app.bench import profile as profiling
    from app.bench.traffic import to_toml

    try:
        request = profiling.load_request(config)
        with open_service(request.store_config()) as service:
            found = profiling.profile(service, request)
    except ImbucketError as error:
        console.print(f"[red]profile:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    text = to_toml(found.traffic(request.messages), found.summary())
    if out is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    else:
        out.write_text(text)
        console.print(f"{found.summary()}\nwrote {out}")


@cli.command("compare")
def compare_command(
    old: Annotated[Path, typer.Argument(help="the earlier results.json")],
    new: Annotated[Path, typer.Argument(help="the later results.json")],
) -> None:
    """Show the change between two benchmark runs."""
    from app.bench import console as bench_console
    from app.bench import report
    from app.bench.compare import compare as compare_runs
    from app.bench.compare import name_run

    try:
        before, after = report.load(old), report.load(new)
    except (OSError, ValueError) as error:
        console.print(f"[red]compare:[/] {error}")
        raise typer.Exit(2) from None
    console.print(bench_console.compare_table(compare_runs(before, after), name_run(before)))


@cli.command("migrate")
def migrate_command(
    source: Annotated[
        Path, typer.Option("--from", help="TOML/JSON settings of the store to copy from")
    ],
    target: Annotated[Path, typer.Option("--to", help="TOML/JSON settings of the store to fill")],
    verify: Annotated[
        bool, typer.Option("--verify", help="then compare both stores; exit 1 if they differ")
    ] = False,
    verify_only: Annotated[
        bool, typer.Option("--verify-only", help="compare without copying anything")
    ] = False,
    batch: Annotated[int, typer.Option(min=1, help="slots or seq rows read per page")] = 500,
) -> None:
    """Copy everything one store holds into another (any backend, layout or bucket size).

    Safe to interrupt and run again; a target entry that differs is reported, never
    overwritten (exit 1). See docs/migrate.md.
    """
    from app import migrate as migration
    from app.migrate_console import MigrateProgress, differences, summary

    err = Console(stderr=True)
    try:
        src = migration.open_endpoint(source)
        dst = migration.open_endpoint(target)
    except ImbucketError as error:
        console.print(f"[red]migrate:[/] {error}")
        raise typer.Exit(2) from None
    failed = False
    with src, dst:
        total = src.store.stats().messages
        runs = ([] if verify_only else ["copy"]) + (["verify"] if verify or verify_only else [])
        for run in runs:
            with MigrateProgress(err, run, total) as progress:
                try:
                    if run == "copy":
                        tally = migration.migrate(src, dst, batch=batch, progress=progress)
                    else:
                        tally = migration.verify(src, dst, batch=batch, progress=progress)
                except migration.TargetConflict as conflict:
                    tally = conflict.tally
            console.print(summary(tally, f"migrate: {run}"))
            if tally.differences:
                failed = True
                what = "conflicts (kept as found)" if run == "copy" else "differences"
                console.print(f"[red]{tally.differences} {what}:[/]")
                for line in differences(tally):
                    console.print(f"  {line}")
    if failed:
        raise typer.Exit(1)


cache_cli = typer.Typer(help="Change which cache fronts a store (docs/redis.md).")
cli.add_typer(cache_cli, name="cache")
_CACHE_CONFIG = typer.Option("--config", help="TOML/JSON settings: the store and the cache")


@cache_cli.command("attach")
def cache_attach(config: Annotated[Path, _CACHE_CONFIG]) -> None:
    """Put the settings' cache in front of the store (first cache, or another Redis/prefix).

    Stop every service of the store first; start them with these settings afterwards.
    """
    _change_cache("attach", config)


@cache_cli.command("detach")
def cache_detach(config: Annotated[Path, _CACHE_CONFIG]) -> None:
    """Remove the cache from the store and empty the settings' cache, if they name one.

    Stop every service of the store first; start them with cache.backend = "none" afterwards.
    """
    _change_cache("detach", config)


def _change_cache(command: str, path: Path) -> None:
    """Run cache attach or detach on the settings at path; one line and exit 2 on error."""
    from app import cache_binding
    from app.migrate import load_config

    try:
        change = cache_binding.attach if command == "attach" else cache_binding.detach
        change(load_config(path))
    except ImbucketError as error:
        console.print(f"[red]cache {command}:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    console.print(f"cache {command}: done")


def main() -> None:
    """Console-script entry point."""
    cli()
