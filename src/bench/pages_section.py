"""Pages per operation: what each engine touched and read for a workload, per layout.

The runner reads each engine's own page counters around every workload's loop
(``imbucket.bench.instrument.pages``); this module renders one table per engine, a column
pair per layout (touched · read) and bucket/row of the pages touched where both ran.
"""

from __future__ import annotations

from imbucket.bench.analysis import ratio
from imbucket.bench.blocks import Block, Bullets, Heading, Para, Table
from imbucket.bench.formatting import fmt_num, fmt_ratio
from imbucket.bench.results import BackendResult, RunResults

ABOUT = (
    "Pages each engine asked its buffer for during a workload (touched: found in memory or "
    "read) and those it had to read from its files (read: buffer misses), divided by the "
    "workload's operations, counted by the engine itself. Touched pages do not depend on "
    "the cache and say what a layout costs in I/O once the data no longer fits in memory; "
    "read pages say what this run's cache missed. On SQLite a page is 'touched' at every "
    "page-cache request (a b-tree's root page once per statement, too). InnoDB's counters "
    "are server-wide: on a shared server other sessions add to them. Where a raw-driver arm "
    "ran interleaved with a pull, its operations are counted with the pull's."
)


def groups(results: RunResults) -> list[list[BackendResult]]:
    """Backends whose pages were counted, by engine and cache, row layout first."""
    found: dict[tuple[str, str, str], list[BackendResult]] = {}
    for b in results.ok_backends():
        if b.pages_source is not None:
            found.setdefault(b.engine_key, []).append(b)
    return [sorted(group, key=lambda b: b.layout != "row") for group in found.values()]


def touched(backend: BackendResult, workload: str) -> float | None:
    """Pages touched per operation of a workload; None: not counted."""
    run = backend.workloads.get(workload)
    return None if run is None or run.pages is None else run.pages.touched_per_op


def read(backend: BackendResult, workload: str) -> float | None:
    """Pages read (buffer misses) per operation of a workload; None: not counted."""
    run = backend.workloads.get(workload)
    return None if run is None or run.pages is None else run.pages.read_per_op


def _cell(backend: BackendResult, workload: str) -> str:
    run = backend.workloads.get(workload)
    if run is None or run.pages is None:
        return ""
    pages = run.pages
    kinds = ", ".join(f"{k} {fmt_num(v, 1)}" for k, v in pages.by_kind.items() if v)
    detail = f" ({kinds})" if kinds else ""
    return f"{fmt_num(pages.touched_per_op, 1)}{detail} · {fmt_num(pages.read_per_op, 1)}"


def _table(group: list[BackendResult], titles: dict[str, str]) -> Table:
    layouts = {b.layout for b in group}
    paired = len(group) == 2 and layouts == {"row", "bucket"}
    headers = ("workload", *(f"{b.label} touched · read" for b in group))
    rows = []
    for name, title in titles.items():
        if all(touched(b, name) is None for b in group):
            continue
        cells = [_cell(b, name) for b in group]
        if paired:
            cells.append(fmt_ratio(ratio(touched(group[1], name), touched(group[0], name))))
        rows.append((title, *cells))
    return Table(headers + (("bucket/row touched",) if paired else ()), tuple(rows))


def blocks(results: RunResults) -> list[Block]:
    """The report's pages-per-operation section."""
    out: list[Block] = [Heading(2, "Pages per operation"), Para(ABOUT)]
    titles = results.parameters.titles(layouts_only=True)
    for group in groups(results):
        first = group[0]
        cache = "" if first.cache == "none" else f"+{first.cache}"
        out.append(Heading(3, f"{first.family}/{first.engine}{cache}"))
        out.append(Para(f"Counted: {first.pages_source}."))
        out.append(_table(group, titles))
    missing = [(f"{b.label}: {b.pages_missing}",) for b in results.ok_backends() if b.pages_missing]
    if missing:
        out += [Para("Not counted:"), Bullets(tuple(missing))]
    return out
