"""``imbucket migrate`` between every ordered pair of the persistent backends here, timed.

For each dataset (``bench.migrate_data``: the demo scenario, the bench small dataset) the data
is written once into a memory store; then, for each persistent row (sql-row and sql-bucket on
SQLite and on each SQL server given, mongo-row and mongo-bucket on the MongoDB given), a
scratch namespace of that row is loaded from memory (itself a migration, verified), and
migrated into a fresh scratch namespace of every other row with ``migrate`` then ``verify``.
Each namespace is dropped when its pairs are done. A pair not started before the time
budget ran out is listed as not run, with an estimate of how long it would have taken.
``tools/migrate_matrix.py`` is the command (``make migrate-matrix``; docs/migrate.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imbucket.app import open_service
from imbucket.app.migrate import Tally, migrate, verify
from imbucket.app.service import MessageService
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.bench.migrate_data import DATASETS
from imbucket.domain.errors import ImbucketError

Config = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Row:
    """A persistent backend row: a store backend on one engine."""

    name: str  # "sql-bucket PostgreSQL"
    backend: str  # "sql-bucket"
    url: str  # the server's URL; "" for an SQLite file


@dataclass(frozen=True, slots=True)
class Pair:
    """What one migration of the matrix did (or why it did not run)."""

    dataset: str
    source: str
    target: str
    messages: int = 0
    seconds: float = 0.0  # the copy
    verify_seconds: float = 0.0
    differences: int = 0
    status: str = "verified"  # "verified", "DIFFERENT", "not run", "failed: …"

    @property
    def rate(self) -> float:
        """Messages copied per second."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        """One Markdown table row."""
        if self.status == "not run":
            return f"| {self.dataset} | {self.source} → {self.target} | | | | | not run |"
        return (
            f"| {self.dataset} | {self.source} → {self.target} | {self.messages:,} | "
            f"{self.seconds:.1f} | {self.rate:,.0f} | {self.verify_seconds:.1f} | "
            f"{self.status} |"
        )


HEADER = (
    "| data | from → to | messages | copy s | msg/s | verify s | verify |\n"
    "|---|---|---:|---:|---:|---:|---|"
)


def rows(postgres: str = "", mariadb: str = "", mongo: str = "", only: str = "") -> list[Row]:
    """The persistent rows available: SQLite always, each server whose URL is given.

    only: comma-separated names (e.g. ``sql-bucket SQLite,mongo-row MongoDB``) to keep.
    """
    engines = [("SQLite", ""), ("PostgreSQL", postgres), ("MariaDB", mariadb)]
    found = [
        Row(f"{backend} {engine}", backend, url)
        for engine, url in engines
        if engine == "SQLite" or url
        for backend in ("sql-row", "sql-bucket")
    ]
    if mongo:
        found += [
            Row(f"{backend} MongoDB", backend, mongo) for backend in ("mongo-row", "mongo-bucket")
        ]
    kept = {name.strip() for name in only.split(",") if name.strip()}
    return [row for row in found if not kept or row.name in kept]


@contextmanager
def namespace(row: Row, workdir: Path, name: str) -> Iterator[Config]:
    """The config of a new, empty namespace of row; dropped (or deleted) afterwards."""
    if not row.url:
        path = workdir / f"{name}.db"
        try:
            yield _config(row.backend, f"sqlite:///{path}")
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    with scratch_store(row.url, name) as url:
        yield _config(row.backend, url)


def _config(backend: str, url: str) -> Config:
    # A shared, loaded machine: a statement of a page's transaction may wait long for its
    # server (a timed-out page is tried again, see imbucket.app.migrate).
    store: dict[str, Any] = {"backend": backend, "url": url, "statement_timeout_seconds": 60}
    if backend.startswith("mongo"):
        # The MongoDB here is an emulator (one Python process): a bulk command's reply may
        # take longer than the default 5 s on a loaded machine, and while it works it does
        # not answer the driver's heartbeats either (within connect_timeout_seconds, or the
        # driver drops the pool and cancels the command in flight).
        store["statement_timeout_seconds"] = 120
        store["connect_timeout_seconds"] = 60
    return {"store": store, "cache": {"backend": "none"}}


def ordered_pairs(matrix_rows: list[Row]) -> list[tuple[Row, Row]]:
    """Every ordered pair of distinct rows: the pairs of SQL rows first, then those with MongoDB.

    In each group the first row goes into every other one first (each target, once
    verified, is the source of its row's pairs: no other load), then rounds in which every
    row is a source once. So a time budget covers every row as source and as target early,
    and spends what is left on the (emulated, slow) MongoDB rows last.
    """
    sql = [row for row in matrix_rows if not row.backend.startswith("mongo")]
    mongo = [p for p in _rounds(matrix_rows) if any(r.backend.startswith("mongo") for r in p)]
    return _rounds(sql) + mongo


def _rounds(matrix_rows: list[Row]) -> list[tuple[Row, Row]]:
    if not matrix_rows:
        return []
    first, *others = matrix_rows
    pairs = [(first, target) for target in others]
    n = len(matrix_rows)
    for offset in range(1, n):
        for i in range(1, n):
            pairs.append((matrix_rows[i], matrix_rows[(i + offset) % n]))
    return pairs


class Matrix:
    """One run of the matrix; ``report`` is called with each pair as it ends."""

    def __init__(
        self,
        matrix_rows: list[Row],
        workdir: Path,
        budget_seconds: float,
        report: Callable[[Pair], None],
    ) -> None:
        self.rows = matrix_rows
        self.workdir = workdir
        self.deadline = time.monotonic() + budget_seconds
        self.report = report
        self.pairs: list[Pair] = []
        self._names = 0

    def run(self, datasets: list[str]) -> list[Pair]:
        """Every ordered pair of rows for every dataset (see ordered_pairs)."""
        for dataset in datasets:
            with open_service(_config("memory", "")) as reference, ExitStack() as stack:
                DATASETS[dataset](reference)
                sources: dict[Row, MessageService] = {}
                for source, target in ordered_pairs(self.rows):
                    if time.monotonic() > self.deadline:
                        self._add(Pair(dataset, source.name, target.name, status="not run"))
                        continue
                    if source not in sources:
                        sources[source] = self._load(dataset, reference, source, stack)
                    self._run_pair(dataset, sources, source, target, stack)
        return self.pairs

    def _run_pair(
        self,
        dataset: str,
        sources: dict[Row, MessageService],
        source: Row,
        target: Row,
        stack: ExitStack,
    ) -> None:
        """One pair into a new namespace; kept as target's source if it has none yet."""
        if target in sources:
            with namespace(target, self.workdir, self._name()) as config:
                self._add(self._pair(dataset, sources[source], config, source.name, target.name))
            return
        config = stack.enter_context(namespace(target, self.workdir, self._name()))
        pair = self._pair(dataset, sources[source], config, source.name, target.name)
        self._add(pair)
        if pair.status == "verified":
            sources[target] = stack.enter_context(open_service(config))

    def _load(
        self, dataset: str, reference: MessageService, row: Row, stack: ExitStack
    ) -> MessageService:
        """A namespace of row holding the dataset (migrated from memory and verified)."""
        config = stack.enter_context(namespace(row, self.workdir, self._name()))
        self._add(self._pair(dataset, reference, config, "memory", row.name))
        return stack.enter_context(open_service(config))

    def _name(self) -> str:
        self._names += 1
        return f"imb_matrix_{os.getpid()}_{self._names}"

    def _pair(
        self, dataset: str, source: MessageService, target: Config, name: str, target_name: str
    ) -> Pair:
        """Migrate then verify, timed."""
        started = time.perf_counter()
        try:
            copied: Tally = migrate(source, target)
            copy_seconds = time.perf_counter() - started
            checked = verify(source, target)
        except ImbucketError as error:
            failed = f"failed: {type(error).__name__}: {error}"
            return Pair(dataset, name, target_name, status=failed[:200])
        verify_seconds = time.perf_counter() - started - copy_seconds
        return Pair(
            dataset,
            name,
            target_name,
            messages=copied.messages,
            seconds=copy_seconds,
            verify_seconds=verify_seconds,
            differences=checked.differences,
            status="verified" if checked.differences == 0 else "DIFFERENT",
        )

    def _add(self, pair: Pair) -> None:
        self.pairs.append(pair)
        self.report(pair)


def estimate(pairs: list[Pair]) -> float:
    """Seconds the pairs not run would take (copy and verify).

    Each at the mean time of the pairs of its dataset run into the same target (the load
    from memory included), else from the same source, else of all its dataset's pairs.
    """
    run = [p for p in pairs if p.status not in {"not run"} and p.messages]
    total = 0.0
    for pair in (p for p in pairs if p.status == "not run"):
        same = [p for p in run if p.dataset == pair.dataset]
        for alike in (
            [p for p in same if p.target == pair.target],
            [p for p in same if p.source == pair.source],
            same,
        ):
            if alike:
                total += sum(p.seconds + p.verify_seconds for p in alike) / len(alike)
                break
    return total


def table(pairs: list[Pair]) -> str:
    """The Markdown table of pairs, with a closing line on what did not run."""
    lines = [HEADER, *(pair.line() for pair in pairs)]
    waiting = sum(p.status == "not run" for p in pairs)
    if waiting:
        lines.append(
            f"\n{waiting} pairs not run within the time budget; "
            f"they would take about {estimate(pairs) / 60:,.1f} more minutes."
        )
    return "\n".join(lines)
