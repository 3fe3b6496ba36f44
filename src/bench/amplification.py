"""Write amplification: the bytes each engine wrote to its log per operation, per layout.

The runner reads each engine's own log counter around every workload's loop
(``imbucket.bench.instrument.wal``); this module groups the backends of one engine and renders one
table per engine: a column per layout, and bucket/row where both ran.
"""

from __future__ import annotations

from imbucket.bench.analysis import ratio
from imbucket.bench.blocks import Block, Bullets, Heading, Para, Table
from imbucket.bench.formatting import fmt_num, fmt_ratio
from imbucket.bench.results import BackendResult, RunResults

ABOUT = (
    "Bytes each engine wrote to its log while a workload ran, divided by the workload's "
    "operations: PostgreSQL's WAL (pg_current_wal_lsn() before and after, with "
    "pg_wal_lsn_diff), InnoDB's redo log (Innodb_os_log_written), SQLite's WAL (frames "
    "appended × (page size + 24), read from the wal-index after every operation, since "
    "SQLite reuses its WAL file after a checkpoint). The counters of PostgreSQL and MariaDB "
    "are server-wide: other sessions on a shared server and the engine's background work "
    "(autovacuum, InnoDB purge) add to them, so a small number on a read-only workload is "
    "that noise (or PostgreSQL's hint bits), and every number is an upper bound for the "
    "bench's own operations."
)


def groups(results: RunResults) -> list[list[BackendResult]]:
    """Backends whose log was measured, by engine and cache, row layout first."""
    found: dict[tuple[str, str, str], list[BackendResult]] = {}
    for b in results.ok_backends():
        if b.log_source is not None:
            found.setdefault(b.engine_key, []).append(b)
    return [sorted(group, key=lambda b: b.layout != "row") for group in found.values()]


def per_op(backend: BackendResult, workload: str, item: bool = False) -> float | None:
    """Log bytes per operation (per item: message or seq) of a workload; None: not measured."""
    run = backend.workloads.get(workload)
    if run is None or run.log is None or not run.ops:
        return None
    return run.log.per_item if item else run.log.per_op


def _table(group: list[BackendResult], titles: dict[str, str]) -> Table:
    layouts = {b.layout for b in group}
    paired = len(group) == 2 and layouts == {"row", "bucket"}
    headers = ("workload", *(f"{b.label} B/op" for b in group))
    rows = []
    lines = [(name, title, False) for name, title in titles.items()]
    if "ingest" in titles:  # the write path of every message, also per message
        lines.insert(1, ("ingest", "ingest, per message", True))
    for name, title, item in lines:
        values = [per_op(b, name, item) for b in group]
        if all(v is None for v in values):
            continue
        cells = [fmt_num(v, 0) for v in values]
        if paired:
            cells.append(fmt_ratio(ratio(values[1], values[0])))
        rows.append((title, *cells))
    return Table(headers + (("bucket/row",) if paired else ()), tuple(rows))


def blocks(results: RunResults) -> list[Block]:
    """The report's write-amplification section."""
    out: list[Block] = [Heading(2, "Write amplification: log bytes per operation"), Para(ABOUT)]
    titles = results.parameters.titles(layouts_only=True)
    for group in groups(results):
        first = group[0]
        out.append(Heading(3, f"{first.family}/{first.engine}" + _cache(first)))
        out.append(Para(f"Counted: {first.log_source}."))
        out.append(_table(group, titles))
    missing = [(f"{b.label}: {b.log_missing}",) for b in results.ok_backends() if b.log_missing]
    if missing:
        out += [Para("Not measured:"), Bullets(tuple(missing))]
    return out


def _cache(backend: BackendResult) -> str:
    return "" if backend.cache == "none" else f"+{backend.cache}"
