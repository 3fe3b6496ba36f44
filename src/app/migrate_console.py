"""The terminal side of ``imbucket migrate``: a rich progress bar and the closing summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from imbucket.app.migrate import Tally
from imbucket.app.progress import LiveProgress


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "-"


class MigrateProgress(LiveProgress):
    """One bar of messages out of the source's count, with conversation and message rates.

    Pass it as the ``progress`` callback of ``migrate`` or ``verify``.
    """

    def __init__(self, console: Console, title: str, messages: int | None) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rates]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.task = self.progress.add_task(title, total=messages, rates="")
        self.title = title

    def __call__(self, tally: Tally) -> None:
        """Show the tally after a page."""
        seconds = tally.seconds
        rates = (
            f"{tally.conversations:,} conversations {_rate(tally.conversations, seconds)}, "
            f"messages {_rate(tally.messages, seconds)}, seq rows {tally.seq_rows:,}, "
            f"differences {tally.differences}"
        )
        self.progress.update(
            self.task,
            completed=tally.messages,
            description=f"{self.title}: {tally.phase}",
            rates=rates,
        )


def summary(tally: Tally, title: str) -> Table:
    """What a run saw and did, with its rates."""
    table = Table(title=title, show_header=False)
    seconds = tally.seconds
    rows = [
        ("conversations", f"{tally.conversations:,}", _rate(tally.conversations, seconds)),
        ("slots", f"{tally.slots:,}", _rate(tally.slots, seconds)),
        ("messages", f"{tally.messages:,}", _rate(tally.messages, seconds)),
        ("seq-store rows", f"{tally.seq_rows:,}", ""),
        ("slots written", f"{tally.written:,}", ""),
        ("differences", f"{tally.differences:,}", ""),
        ("seconds", f"{seconds:.1f}", ""),
    ]
    for row in rows:
        table.add_row(*row)
    return table


def differences(tally: Tally) -> list[str]:
    """The first differences, one printable line each."""
    lines = [escape(str(difference)) for difference in tally.first]
    if tally.differences > len(tally.first):
        lines.append(f"… and {tally.differences - len(tally.first):,} more")
    return lines
