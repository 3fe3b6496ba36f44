"""The change between two runs, backend by backend and workload by workload."""

from __future__ import annotations

from dataclasses import dataclass

from imbucket.bench.analysis import ratio
from imbucket.bench.defaults import NOTABLE_CHANGE
from imbucket.bench.formatting import fmt_num, fmt_us
from imbucket.bench.results import CompareSummary, Comparison, RunResults


@dataclass(frozen=True, slots=True)
class Change:
    """One backend × workload compared between an old and a new run."""

    backend: str
    workload: str
    old_p50: float | None
    new_p50: float | None
    old_trips: float | None
    new_trips: float | None

    @property
    def p50_change(self) -> float | None:
        """Relative change of the median latency (+0.10 = 10 % slower)."""
        value = ratio(self.new_p50, self.old_p50)
        return None if value is None else value - 1

    @property
    def notable(self) -> bool:
        """Whether the median latency moved by more than NOTABLE_CHANGE either way."""
        change = self.p50_change
        return change is not None and abs(change) > NOTABLE_CHANGE

    def cells(self) -> tuple[str, ...]:
        """Table cells: backend, workload, old, new, change, round trips."""
        change = self.p50_change
        return (
            self.backend,
            self.workload,
            fmt_us(self.old_p50),
            fmt_us(self.new_p50),
            "–" if change is None else f"{change:+.0%}",
            f"{fmt_num(self.old_trips)} → {fmt_num(self.new_trips)}",
        )


HEADERS = ("backend", "workload", "old p50", "new p50", "change", "round trips")


def compare(old: RunResults, new: RunResults) -> list[Change]:
    """Changes for every backend label and workload present in both runs."""
    before = {b.label: b for b in old.ok_backends()}
    changes = []
    for backend in new.ok_backends():
        previous = before.get(backend.label)
        if previous is None:
            continue
        for name in backend.workloads:
            if name not in previous.workloads:
                continue
            changes.append(
                Change(
                    backend.label,
                    name,
                    previous.p50(name),
                    backend.p50(name),
                    previous.trips(name),
                    backend.trips(name),
                )
            )
    return changes


def name_run(run: RunResults) -> str:
    """One line naming a run: when, which commit, which scale."""
    commit = (run.git.commit or "")[:10] or "unknown commit"
    return f"{run.created} ({commit}, scale {run.parameters.scale})"


def summary(changes: list[Change]) -> CompareSummary:
    """Counts of notable changes (more than 10 % either way, or other round trips)."""
    notable = [c for c in changes if c.notable and c.p50_change is not None]
    return CompareSummary(
        compared=len(changes),
        slower=sum(c.p50_change is not None and c.p50_change > 0 for c in notable),
        faster=sum(c.p50_change is not None and c.p50_change < 0 for c in notable),
        round_trips_changed=sum(c.old_trips != c.new_trips for c in changes),
    )


def comparison(old: RunResults, new: RunResults) -> Comparison:
    """The change since old, as results.json stores it."""
    changes = compare(old, new)
    return Comparison(
        against=name_run(old),
        summary=summary(changes),
        changes=[dict(zip(HEADERS, c.cells(), strict=True)) for c in changes],
    )
