"""The imbucket command line: bench, compare, demo, inspect, backends."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import replace
from enum import StrEnum
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from adapters.codec import slot_to_doc
from app import open_container, open_service
from app.backends import plugin_names
from app.demo import DEMO_CONVERSATION, USERS, cell_text, play, views
from app.settings import CACHE_BACKENDS, STORE_BACKENDS, load_settings
from domain.errors import (
    ConfigError,
    ImbucketError,
    InvalidArgument,
    LayoutMismatch,
    NotPermitted,
)
from domain.projection import MessageView, Tombstone

if TYPE_CHECKING:  # the benchmark is imported by its commands only
    from app.bench.results import RunResults
    from app.bench.runner import Options as RunnerOptions
    from app.bench.spec import BackendSpec

# Mistakes the user can fix (exit 2); any other ImbucketError is an outage or a refusal (exit 1).
USER_ERRORS: tuple[type[ImbucketError], ...] = (
    ConfigError,
    InvalidArgument,
    LayoutMismatch,
    NotPermitted,
)


def refuse(command: str, error: BaseException, code: int) -> NoReturn:
    """Say what went wrong on one stderr line (no traceback), then exit with code."""
    typer.echo(f"imbucket {command}: {type(error).__name__}: {error}", err=True)
    raise typer.Exit(code)


class _Commands(TyperGroup):
    """imbucket's command group: every subcommand's ImbucketError ends as one line."""

    # Any: the click Context type lives in click or, in newer typer releases, in typer's own copy.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ImbucketError as error:
            code = 2 if isinstance(error, USER_ERRORS) else 1
            refuse(ctx.invoked_subcommand or "", error, code)


# Plain help: rich markup would take "[traffic]" in a help text for a style and drop it.
cli = typer.Typer(
    cls=_Commands,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},
)
console = Console(width=120) if not Console().is_terminal else Console()


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"imbucket {metadata.version('imbucket')}")
        raise typer.Exit()


@cli.callback()
def _imbucket(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """imbucket: an IM message store on OpenIM's bucket layout.

    Settings come from defaults, then the TOML/JSON file named by IMBUCKET_CONFIG, then
    IMBUCKET_* environment variables (nested keys joined by a double underscore, e.g.
    IMBUCKET_STORE__BACKEND=sql-bucket IMBUCKET_STORE__URL=sqlite:///chat.db), then the file
    a command's --config names. A mistake in them is one line on stderr and exit 2.
    """


SettingsOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="TOML/JSON settings file, merged over IMBUCKET_CONFIG and the IMBUCKET_* "
        "variables (e.g. IMBUCKET_STORE__BACKEND=sql-row)",
    ),
]


def _overrides(config: Path | None) -> Mapping[str, Any] | None:
    """The settings a --config file holds, None without one."""
    from app.migrate import load_config

    return load_config(config) if config is not None else None


_STYLES = {
    "deleted": "red",
    "cleared": "yellow",
    "purged": "magenta",
    "missing": "bright_black",
    "unallocated": "bright_black",
}


def _backend_line(overrides: Mapping[str, Any] | None) -> str:
    settings = load_settings(overrides)
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
def demo(config: SettingsOption = None) -> None:
    """Play the article's scenario and show what each user sees for the same seqs."""
    overrides = _overrides(config)
    with open_service(overrides) as service:
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
        console.print(_backend_line(overrides))
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
    config: SettingsOption = None,
) -> None:
    """Show where a seq lives (doc_id, slot) and the raw slot stored there."""
    overrides = _overrides(config)
    with open_service(overrides) as service:
        memory = load_settings(overrides).store.backend == "memory"
        if conversation == DEMO_CONVERSATION and memory:
            play(service)
            console.print("(memory backend keeps nothing between runs: the demo was played first)")
        found = service.inspect(conversation, seq)
        console.print(_backend_line(overrides))
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
def backends(config: SettingsOption = None) -> None:
    """List the backends (plugins too) and check that the configured one is reachable."""
    overrides = _overrides(config)
    settings = load_settings(overrides)
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
        container = open_container(overrides)
        with container.service() as service:
            service.max_seq("imbucket-healthcheck")
            version = container.version()
        suffix = f" ({escape(version)})" if version else ""
        console.print(f"[green]reachable[/]: {_backend_line(overrides)}{suffix}")
    except ImbucketError as error:
        if isinstance(error, USER_ERRORS):
            raise
        console.print(f"[red]unreachable[/]: {_backend_line(overrides)}: {escape(str(error))}")
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
        bool,
        typer.Option(
            "--contention/--no-contention",
            help="run the contention workloads (N concurrent workers)",
        ),
    ] = True,
) -> None:
    """Run the same workloads on every chosen backend and write a bucket-vs-row report.

    Each backend's settings are merged over IMBUCKET_CONFIG and the IMBUCKET_* variables
    (e.g. IMBUCKET_LIMITS__MAX_CONTENT_BYTES=65536). A run in which every backend is skipped
    says why on stderr, writes no report and exits 1.
    """
    from app.bench import console as bench_console
    from app.bench import report, runner

    try:
        specs, options, previous = _bench_plan(
            backend, config, scale, seed, compare, redis_url, workload, bucket_size, traffic
        )
    except (OSError, ValueError) as error:
        refuse("bench", error, 2)
    options = replace(options, contention=contention)
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

    load_settings()  # a settings mistake is refused here, not once per skipped backend
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
    """Derive a [traffic] table for `imbucket bench --traffic` from an existing store.

    The store's settings are merged over IMBUCKET_CONFIG and the IMBUCKET_* variables
    (e.g. IMBUCKET_STORE__BACKEND=sql-row).
    """
    from app.bench import profile as profiling
    from app.bench.traffic import to_toml

    request = profiling.load_request(config)
    with open_service(request.store_config()) as service:
        found = profiling.profile(service, request)
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
        refuse("compare", error, 2)
    console.print(bench_console.compare_table(compare_runs(before, after), name_run(before)))


@cli.command("migrate")
def migrate_command(
    source: Annotated[
        Path, typer.Option("--from", help="TOML/JSON settings of the store to copy from")
    ],
    target: Annotated[Path, typer.Option("--to", help="TOML/JSON settings of the store to fill")],
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify", help="then compare both stores; exit 1 if they differ"
        ),
    ] = False,
    verify_only: Annotated[
        bool, typer.Option("--verify-only", help="compare without copying anything")
    ] = False,
    batch: Annotated[int, typer.Option(min=1, help="slots or seq rows read per page")] = 500,
) -> None:
    """Copy everything one store holds into another (any backend, layout or bucket size).

    Safe to interrupt and run again; a target entry that differs is reported, never
    overwritten (exit 1). Both files are merged over IMBUCKET_CONFIG and the IMBUCKET_*
    variables (e.g. IMBUCKET_STORE__BACKEND=sql-row). See docs/migrate.md.
    """
    from app import migrate as migration
    from app.migrate_console import MigrateProgress, differences, summary

    err = Console(stderr=True)
    src = migration.open_endpoint(source)
    dst = migration.open_endpoint(target)
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


def main() -> None:
    """Console-script entry point (also ``python -m app`` and ``python -m app.cli``)."""
    cli(prog_name="imbucket")


if __name__ == "__main__":
    main()
