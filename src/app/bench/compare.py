"""The change between two runs, backend by backend and workload by workload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.bench.analysis import Results, fmt_num, fmt_us, ok_backends, p50, ratio, trips


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


def compare(old: Results, new: Results) -> list[Change]:
    """Changes for every backend label and workload present in both runs."""
    before = {b["label"]: b for b in ok_backends(old)}
    changes = []
    for backend in ok_backends(new):
        previous = before.get(backend["label"])
        if previous is None:
            continue
        for name in backend["workloads"]:
            if name not in previous["workloads"]:
                continue
            changes.append(
                Change(
                    backend["label"],
                    name,
                    p50(previous, name),
                    p50(backend, name),
                    trips(previous, name),
                    trips(backend, name),
                )
            )
    return changes


def describe(run: Results) -> str:
    """One line naming a run: when, which commit, which scale."""
    commit = run.get("git", {}).get("commit", "")[:10] or "unknown commit"
    return f"{run['created']} ({commit}, scale {run['parameters']['scale']})"


def summary(changes: list[Change]) -> dict[str, Any]:
    """Counts of notable changes (more than 10 % either way, or other round trips)."""
    known = [c for c in changes if c.p50_change is not None]
    return {
        "compared": len(changes),
        "slower": sum(c.p50_change > 0.10 for c in known if c.p50_change is not None),
        "faster": sum(c.p50_change < -0.10 for c in known if c.p50_change is not None),
        "round_trips_changed": sum(c.old_trips != c.new_trips for c in changes),
    }
