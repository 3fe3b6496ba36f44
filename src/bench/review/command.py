"""``imbucket review``: the command line of a design review (registered by bench.cli)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from imbucket.app.cli import console, refuse
from imbucket.domain.errors import ConfigError

FIRST_SCREEN = 40  # lines of memo.md printed at the end: the answers


_Engines = Annotated[
    str,
    typer.Option(
        help="engines: sqlite, postgresql, mariadb (private instances the review starts "
        "and stops) or SQLAlchemy URLs, comma-separated"
    ),
]
_Budget = Annotated[str, typer.Option(help="time budget across every regime, e.g. 10m, 30m, 1h")]
_Profile = Annotated[
    Path | None,
    typer.Option(help="TOML/JSON file with a [traffic] table (default: the built-in mix)"),
]
_Target = Annotated[int, typer.Option(min=1, help="messages stored, for the capacity plan")]
_Pulls = Annotated[float, typer.Option(min=0.001, help="pulls per second, for the capacity plan")]
_Seed = Annotated[int, typer.Option(help="dataset seed")]
_Out = Annotated[
    Path | None, typer.Option(help="memo folder (default reports/review-<timestamp>/)")
]


def review_command(
    engines: _Engines = "sqlite",
    budget: _Budget = "10m",
    profile: _Profile = None,
    target_messages: _Target = 1_000_000_000,
    pulls_per_s: _Pulls = 10_000.0,
    seed: _Seed = 42,
    out: _Out = None,
) -> None:
    """Review bucket vs row per engine over every regime, within a time budget; write a memo.

    Regimes: in memory (with offered load), out of memory (a memory budget), growth (sizes
    ten times apart), contention to completion, and a capacity plan for --target-messages.
    The memo (memo.md, memo.html, review.json) opens with one answer per engine and regime.
    """
    from imbucket.bench import console as bench_console
    from imbucket.bench import instances
    from imbucket.bench.review import memo
    from imbucket.bench.review.budget import parse_duration
    from imbucket.bench.review.run import Request, parse_engines, review
    from imbucket.bench.traffic import load_traffic
    from imbucket.bench.workloads import WORKLOAD_NAMES

    try:
        traffic = load_traffic(profile, WORKLOAD_NAMES) if profile else None
        request = Request(
            parse_engines(engines),
            parse_duration(budget),
            traffic,
            str(profile) if profile else None,
            target_messages,
            pulls_per_s,
            seed,
        )
    except (OSError, ValueError, ConfigError) as error:
        refuse("review", error, 2)
    folder = out or Path("reports") / dt.datetime.now().strftime("review-%Y%m%d-%H%M%S")
    instances.stop_on_sigterm()
    err = Console(stderr=True)

    def say(line: str) -> None:
        err.print(escape(line), highlight=False)

    found = review(request, lambda: bench_console.RichObserver(err), say, folder)
    md, html, data = memo.write(found, folder)
    first = md.read_text().splitlines()[:FIRST_SCREEN]
    console.print("\n".join(first), markup=False, highlight=False, soft_wrap=True)
    console.print(f"memo: {html}\n      {md}\n      {data}", markup=False, highlight=False)
