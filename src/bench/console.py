"""Rich progress bars while a run goes, and the terminal summary at its end."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from imbucket.app.progress import LiveProgress
from imbucket.bench.analysis import pairs
from imbucket.bench.compare import HEADERS, Change
from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.readings import verdict_summary
from imbucket.bench.results import RunResults
from imbucket.bench.runner import Observer
from imbucket.bench.targets import targets

_VERDICT_STYLE = {"pass": "green", "FAIL": "bold red", "n/a": "dim", "inconclusive": "yellow"}


class RichObserver(LiveProgress, Observer):
    """One bar per backend; a workload runs on every backend before the next one starts."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description:<46}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}

    def backend(self, label: str, ops: int) -> None:
        """Add the bar of an opened backend."""
        self.tasks[label] = self.progress.add_task(escape(label), total=ops)

    def workload(self, label: str, title: str, ops: int) -> None:
        """Show which workload runs on the backend."""
        self.progress.update(self.tasks[label], description=escape(f"{label} · {title}"))

    def advance(self, label: str) -> None:
        """One operation done."""
        self.progress.advance(self.tasks[label])

    def done(self, label: str, status: str, note: str) -> None:
        """Close the backend's bar, or say why it was skipped."""
        if label in self.tasks:
            self.progress.update(self.tasks[label], description=escape(f"{label} · {status}"))
        if status != "ok":
            self.progress.console.print(f"[yellow]skipped {escape(label)}[/]: {escape(note)}")
        elif not self.console.is_terminal:
            self.console.print(f"done {escape(label)}")


def summary_table(results: RunResults) -> Table:
    """Workloads × backends: p50 and round trips per operation."""
    backends = results.ok_backends()
    table = Table(title="p50 latency · round trips per op", title_justify="left")
    table.add_column("workload")
    for b in backends:
        table.add_column(escape(b.label), justify="right")
    for name, title in results.parameters.titles().items():
        if not any(name in b.workloads for b in backends):
            continue
        cells = [
            f"{fmt_us(b.p50(name))} · {fmt_num(b.trips(name))}" if name in b.workloads else ""
            for b in backends
        ]
        table.add_row(title, *cells)
    return table


def verdicts(results: RunResults) -> list[str]:
    """The answer per engine, then one sentence per bucket/row pair: where each layout wins."""
    from imbucket.bench.answer import answers

    titles = results.parameters.titles(layouts_only=True)
    return [*answers(results), *(verdict_summary(pair, titles) for pair in pairs(results))]


def targets_table(results: RunResults) -> Table:
    """The project's targets as measured."""
    table = Table(title="targets", title_justify="left")
    for header in ("target", "where", "measured", "result"):
        table.add_column(header)
    for t in targets(results):
        style = _VERDICT_STYLE[t.verdict]
        cells = (escape(t.target), escape(t.scope), escape(t.measured))
        table.add_row(*cells, f"[{style}]{t.verdict}[/]")
    return table


def compare_table(changes: list[Change], against: str) -> Table:
    """Changes between two runs."""
    table = Table(title=f"change since {against}", title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="right" if header != "backend" else "left")
    for change in changes:
        cells = [escape(cell) for cell in change.cells()]
        delta = change.p50_change
        if delta is not None and change.notable:
            cells[4] = f"[{'red' if delta > 0 else 'green'}]{cells[4]}[/]"
        table.add_row(*cells)
    return table


def contention_lines(results: RunResults) -> list[str]:
    """One line per contention scenario: how throughput scales and what the stores counted."""
    from imbucket.bench import concurrency

    backends = results.ok_backends()
    return [
        f"contention, {concurrency.SCENARIO_TITLES[s]}: {concurrency.reading(backends, s)}"
        for s in concurrency.scenarios(backends)
    ]
