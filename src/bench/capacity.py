"""A capacity plan: what a target size and load would need, projected from one run's counts.

A projection, not a measurement: it scales the run's bytes per message and pages touched per
operation linearly to the target, as if they stayed flat with size (the scale curve shows
where they do not). Every number is recomputable from results.json with the formulas in
``FORMULAS``:

- rate of workload i:  r_i = pulls/s × w_i / Σ w_pull (w: the traffic's mix; the pulls are
  pull_latest, pull_range and pull_scattered, so the other operations keep their share)
- disk  = messages × (data B/msg + index B/msg)
- RAM to keep the indexes resident = messages × index B/msg
- pages touched/s = Σ r_i × pages touched per op of i
- read bytes/s, at most = pages touched/s × the engine's page size (no data page cached)
"""

from __future__ import annotations

from dataclasses import dataclass

from imbucket.bench.blocks import Block, Heading, Para, Table
from imbucket.bench.formatting import fmt_num
from imbucket.bench.results import BackendResult, RunResults
from imbucket.bench.traffic import Traffic

PULLS = ("pull_latest", "pull_range", "pull_scattered")
PAGE_BYTES = {"postgresql": 8192, "mariadb": 16384, "mysql": 16384, "sqlite": 4096}
DEFAULT_MESSAGES = 1_000_000_000
DEFAULT_PULLS_PER_S = 10_000.0

FORMULAS = (
    "r_i = pulls/s × w_i / Σ w_pull;  disk = messages × (data + index B/msg);  "
    "RAM for indexes = messages × index B/msg;  pages/s = Σ r_i × pages touched/op_i;  "
    "read bytes/s ≤ pages/s × page size"
)


@dataclass(frozen=True, slots=True)
class Target:
    """What the plan is for: messages stored, and pulls per second with the traffic's mix."""

    messages: int = DEFAULT_MESSAGES
    pulls_per_s: float = DEFAULT_PULLS_PER_S


@dataclass(frozen=True, slots=True)
class Need:
    """What one backend would need for the target (a projection)."""

    label: str
    disk_bytes: float
    index_ram_bytes: float
    pages_per_s: float
    read_bytes_per_s: float | None  # None: the engine's page size is not known
    missing: tuple[str, ...] = ()  # workloads of the mix with no page count (left out)


def rates(results: RunResults, target: Target) -> dict[str, float]:
    """Operations per second of each workload of the traffic's mix at the target's pulls/s."""
    weights = (results.parameters.traffic or Traffic()).weights()
    pulls = sum(weights.get(name, 0.0) for name in PULLS)
    if not pulls:
        return {}
    return {name: target.pulls_per_s * w / pulls for name, w in weights.items() if w > 0}


def need(backend: BackendResult, results: RunResults, target: Target) -> Need | None:
    """The backend's projected needs, None when it was not sized or its pages not counted."""
    footprint = backend.footprint.measured()
    if footprint is None or backend.pages_source is None:
        return None
    per_message = footprint.data_bytes_per_message + footprint.index_bytes_per_message
    pages, missing = 0.0, []
    for name, rate in rates(results, target).items():
        run = backend.workloads.get(name)
        if run is None or run.pages is None:
            missing.append(name)
            continue
        pages += rate * run.pages.touched_per_op
    page_bytes = PAGE_BYTES.get(backend.engine)
    return Need(
        backend.label,
        target.messages * per_message,
        target.messages * footprint.index_bytes_per_message,
        pages,
        None if page_bytes is None else pages * page_bytes,
        tuple(missing),
    )


def plan(results: RunResults, target: Target | None = None) -> list[Need]:
    """Every sized, page-counted backend's needs for target (the defaults: 1 billion, 10k/s)."""
    target = target or Target()
    found = (need(b, results, target) for b in results.ok_backends())
    return [n for n in found if n is not None]


def _bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{fmt_num(value / size, 1)} {unit}"
    return f"{fmt_num(value, 0)} B"


def rows(needs: list[Need]) -> tuple[tuple[str, ...], ...]:
    """The plan's table rows."""
    return tuple(
        (
            n.label,
            _bytes(n.disk_bytes),
            _bytes(n.index_ram_bytes),
            f"{n.pages_per_s:,.0f}",
            _bytes(n.read_bytes_per_s) + ("/s" if n.read_bytes_per_s is not None else ""),
            ", ".join(n.missing),
        )
        for n in needs
    )


HEADERS = ("backend", "disk", "RAM for indexes", "pages touched/s", "read ≤", "not counted")


def blocks(results: RunResults, target: Target | None = None) -> list[Block]:
    """The report's capacity-plan section (empty when no backend was sized and counted)."""
    target = target or Target()
    needs = plan(results, target)
    if not needs:
        return []
    mix = ", ".join(f"{k} {v:,.0f}/s" for k, v in rates(results, target).items())
    return [
        Heading(2, "Capacity plan (a projection)"),
        Para(
            f"A projection, not a measurement: {target.messages:,} messages and "
            f"{target.pulls_per_s:,.0f} pulls/s with the traffic's mix ({mix}), from this "
            "run's bytes per message (after ingest) and pages touched per operation, scaled "
            "linearly as if they stayed flat with size. 'read ≤' is the I/O if no data page "
            f"were cached. Formulas: {FORMULAS}. `imbucket plan results.json --messages N "
            "--pulls-per-s P` recomputes it for another target."
        ),
        Table(HEADERS, rows(needs)),
    ]
