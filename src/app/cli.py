"""The imbucket command line: demo, inspect, backends, migrate.

Other packages add their own commands through the ``imbucket.commands`` entry point group
(a callable taking the Typer app): the benchmark lab adds bench, profile and compare.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from imbucket.adapters.codec import slot_to_doc
from imbucket.adapters.extras import EXTRAS, missing
from imbucket.app import open_container, open_service
from imbucket.app.demo import DEMO_CONVERSATION, USERS, cell_text, play, views
from imbucket.app.registry import CACHES, REGISTRY
from imbucket.app.service import HEALTH_CONVERSATION
from imbucket.app.settings import load_settings
from imbucket.domain.errors import (
    ConfigError,
    ImbucketError,
    InvalidArgument,
    LayoutMismatch,
    NotPermitted,
)
from imbucket.domain.projection import MessageView, Tombstone

if TYPE_CHECKING:
    from imbucket.app.migrate import Tally

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
    """imbucket's command group: every subcommand's ImbucketError ends as one line.

    So does a package of an extra that is not installed (the lab's numpy and matplotlib): one
    line naming the extra, exit 2.
    """

    # Any: the click Context type lives in click or, in newer typer releases, in typer's own copy.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ImbucketError as error:
            code = 2 if isinstance(error, USER_ERRORS) else 1
            refuse(ctx.invoked_subcommand or "", error, code)
        except ModuleNotFoundError as error:
            if (error.name or "").split(".")[0] not in EXTRAS:
                raise
            command = ctx.invoked_subcommand or ""
            refuse(command, missing(error, f"imbucket {command}"), 2)


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
    from imbucket.app.migrate import load_config

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
    for name in REGISTRY.builtins():
        table.add_row("store", name, "yes" if name == settings.store.backend else "")
    for name in REGISTRY.plugins():
        table.add_row("store (plugin)", name, "yes" if name == settings.store.backend else "")
    for name in CACHES.names():
        table.add_row("cache", name, "yes" if name == settings.cache.backend else "")
    console.print(table)
    try:
        container = open_container(overrides)
        with container.service() as service:
            service.max_seq(HEALTH_CONVERSATION)
            version = container.version()
            cache = service.health().cache
        suffix = f" ({escape(version)})" if version else ""
        console.print(f"[green]reachable[/]: {_backend_line(overrides)}{suffix}")
    except ImbucketError as error:
        if isinstance(error, USER_ERRORS):
            raise
        console.print(f"[red]unreachable[/]: {_backend_line(overrides)}: {escape(str(error))}")
        raise typer.Exit(1) from None
    if cache is not None:
        where = f"cache {cache.backend} at {escape(settings.cache.url)}"
        if not cache.reachable:
            console.print(f"[red]unreachable[/]: {where}: {escape(cache.detail)}")
            raise typer.Exit(1)
        console.print(f"[green]reachable[/]: {where}")


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
    allow_ephemeral_target: Annotated[
        bool,
        typer.Option(
            "--allow-ephemeral-target",
            help="let the target be a store that keeps nothing once closed (experiments)",
        ),
    ] = False,
) -> None:
    """Copy everything one store holds into another (any backend, layout or bucket size).

    Safe to interrupt and run again; a target entry that differs is reported, never
    overwritten (exit 1). A source or target that keeps nothing once closed (memory, an
    in-memory SQLite URL) or a target that is the source's store is refused (exit 2). Both
    files are merged over IMBUCKET_CONFIG and the IMBUCKET_* variables (e.g.
    IMBUCKET_STORE__BACKEND=sql-row). See docs/migrate.md.
    """
    from imbucket.app import migrate as migration
    from imbucket.app.migrate_console import MigrateProgress, differences, summary

    err = Console(stderr=True)
    migration.check_endpoints(
        source, target, copying=not verify_only, allow_ephemeral_target=allow_ephemeral_target
    )
    src = migration.open_endpoint(source)
    dst = migration.open_endpoint(target)
    failed = False
    with src, dst:
        total = src.store.stats().messages
        runs = ([] if verify_only else ["copy"]) + (["verify"] if verify or verify_only else [])
        for run in runs:
            with MigrateProgress(err, run, total) as progress:
                try:
                    step = migration.migrate if run == "copy" else migration.verify
                    tally = step(src, dst, batch=batch, progress=progress)
                except migration.TargetConflict as conflict:
                    tally = conflict.tally
            console.print(summary(tally, f"migrate: {run}"))
            failed |= _report_differences(tally, run, differences)
    if failed:
        raise typer.Exit(1)


def _report_differences(tally: Tally, run: str, lines: Callable[[Tally], Iterable[str]]) -> bool:
    """Print a run's conflicts or differences; whether there were any."""
    if not tally.differences:
        return False
    what = "conflicts (kept as found)" if run == "copy" else "differences"
    console.print(f"[red]{tally.differences} {what}:[/]")
    for line in lines(tally):
        console.print(f"  {line}")
    return True


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
    """Run cache attach or detach on the settings at path."""
    from imbucket.app import cache_binding
    from imbucket.app.migrate import load_config

    change = cache_binding.attach if command == "attach" else cache_binding.detach
    change(load_config(path))
    console.print(f"cache {command}: done")


COMMANDS_GROUP = "imbucket.commands"


def add_plugin_commands(app: typer.Typer) -> None:
    """Let every ``imbucket.commands`` entry point add its commands to app."""
    for entry in metadata.entry_points(group=COMMANDS_GROUP):
        entry.load()(app)


add_plugin_commands(cli)


def main() -> None:
    """Console-script entry point (also ``python -m imbucket``)."""
    cli(prog_name="imbucket")
