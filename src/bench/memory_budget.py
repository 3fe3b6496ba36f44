"""The memory-budget run: each SQL engine's buffer at a budget; pages read and p50, cold, warm.

PostgreSQL and MariaDB run as private instances (``imbucket.bench.instances``); SQLite runs on
a file with ``cache_size`` at the budget on every connection. Both layouts load the same
dataset through the bulk loader (``imbucket.bench.bulk``: the state ``ingest`` leaves); a
budget in percent is of the row layout's data + index bytes on that engine (the larger of the
two, so both layouts get the same memory). Then, for each
measured workload and layout:

- cold: the engine's dirty pages are written, the server restarted (its buffer empty) or
  SQLite's connections closed, and the OS page cache of its files dropped
  (``posix_fadvise(DONTNEED)``); the workload's operations then run once;
- warm: the read workloads run their operations a second time right after.

Pages read per operation are the engine's buffer misses (the meter of
``imbucket.bench.instrument.pages``); on a cold pass they come from the disk or, for pages
the kernel kept, from the OS page cache.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from imbucket.app.service import MessageService
from imbucket.bench import bulk, instances
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.bench.instrument.maintenance import cluster_rows, routine_maintenance
from imbucket.bench.instrument.pages import page_meter, sql_engine
from imbucket.bench.instrument.probe import Probe, probing
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.bench.metrics import Recorder
from imbucket.bench.runner import Observer
from imbucket.bench.workloads import WORKLOADS, Op, Subject
from imbucket.domain.errors import ConfigError

READS = ("pull_latest", "pull_range", "pull_scattered")
WRITES = ("delete_for_me",)
ENGINES = ("postgresql", "mariadb", "sqlite")
LAYOUTS = ("sql-row", "sql-bucket")
# The row layout as a DBA keeps it on PostgreSQL, whose heap holds rows in arrival order: the
# same store, clustered by (conversation_id, seq) after the load. InnoDB and SQLite keep rows
# in primary-key order by themselves.
CLUSTERED_ROWS = "sql-row clustered"
# A bulk chunk, or a cold read on a loaded machine, may take longer than the default 5 s.
STORE = {"statement_timeout_seconds": 600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def arms(engine: str) -> tuple[str, ...]:
    """The stores measured on engine: both layouts, and on PostgreSQL the clustered rows."""
    return (*LAYOUTS, CLUSTERED_ROWS) if engine == "postgresql" else LAYOUTS


def backend_of(arm: str) -> str:
    """The backend an arm opens (``sql-row`` for the clustered rows)."""
    return arm.split()[0]


def prepare(arm: str, service: MessageService) -> None:
    """After the load: the engine's routine maintenance, and CLUSTER first for clustered rows.

    The routine maintenance is the one the in-memory run does after each workload: VACUUM on
    PostgreSQL (as autovacuum would), the write-back of page-compressed tables on MariaDB.
    """
    if arm == CLUSTERED_ROWS:
        cluster_rows(service.store)
    routine = routine_maintenance(service.store)
    if routine is not None:
        step, _ = routine
        step()


@dataclass(frozen=True, slots=True)
class Budget:
    """A memory budget: a share of the dataset's bytes, or an absolute size."""

    share: float | None = None  # 0.1 for "10%"
    size: int | None = None  # bytes

    def bytes_for(self, dataset_bytes: int) -> int:
        """The budget in bytes for a dataset of dataset_bytes."""
        return self.size if self.size is not None else int(dataset_bytes * (self.share or 0))

    def __str__(self) -> str:
        return f"{self.share:.0%}" if self.share is not None else f"{self.size} bytes"


def parse_budget(text: str) -> Budget:
    """``10%`` (of the dataset's bytes) or a size such as ``64MB``, ``512KiB``; ConfigError."""
    stripped = text.strip()
    if stripped.endswith("%"):
        try:
            share = float(stripped[:-1]) / 100
        except ValueError:
            share = 0.0
        if not 0 < share <= 1:
            raise ConfigError(f"memory budget {text!r}: a share must be in (0%, 100%]")
        return Budget(share=share)
    match = _SIZE.match(stripped)
    if match is None or float(match[1]) <= 0:
        raise ConfigError(f"memory budget {text!r} is neither a share (10%) nor a size (64MB)")
    unit = _UNITS[match[2][:1].lower()]
    return Budget(size=int(float(match[1]) * unit))


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass of a workload's operations: latency and pages per operation."""

    ops: int
    p50_us: int
    p99_us: int
    touched_per_op: float
    read_per_op: float
    errors: int


@dataclass
class LayoutRun:
    """One layout on one engine under the budget."""

    engine: str
    store: str
    data_bytes: int = 0
    index_bytes: int = 0
    messages: int = 0
    cold: dict[str, Pass] = field(default_factory=dict)
    warm: dict[str, Pass] = field(default_factory=dict)


@dataclass
class EngineRun:
    """One engine: the budget it ran with and its layouts."""

    engine: str
    dataset_bytes: int  # the row layout's data + index bytes
    budget_bytes: int
    buffer_bytes: int  # what the engine ran with (the budget raised to the engine's floor)
    layouts: list[LayoutRun] = field(default_factory=list)
    reason: str | None = None  # set when the engine could not run


@dataclass
class MemoryResults:
    """What ``imbucket bench --memory-budget`` measured (memory.json)."""

    scale: str
    seed: int
    budget: str
    messages: int
    engines: list[EngineRun] = field(default_factory=list)

    def to_json(self) -> str:
        """memory.json's text."""
        return json.dumps(asdict(self), indent=2)


def run(
    engines: tuple[str, ...], budget: Budget, scale: str, seed: int, observer: Observer
) -> MemoryResults:
    """Load the dataset on each engine, bound its buffer to the budget, measure cold and warm."""
    unknown = set(engines) - set(ENGINES)
    if unknown or scale not in SCALES:
        raise ConfigError(f"memory budget: engines among {ENGINES}, scales among {list(SCALES)}")
    dataset = Dataset(SCALES[scale], seed)
    plans = {w.name: w.plan(dataset) for w in WORKLOADS if w.name in {*READS, *WRITES}}
    results = MemoryResults(scale, seed, str(budget), dataset.messages)
    for engine in engines:
        try:
            results.engines.append(_engine_run(engine, budget, dataset, plans, observer))
        except Exception as error:  # one engine failing (absent server) does not end the run
            reason = f"{type(error).__name__}: {error}"
            observer.done(engine, "skipped", reason)
            results.engines.append(EngineRun(engine, 0, 0, 0, reason=reason))
    return results


@dataclass
class _Target:
    """Where an engine runs: a private instance, or an SQLite file in a folder."""

    engine: str
    folder: Path
    instance: instances.Instance | None = None
    cache_kib: int | None = None

    def url(self, store: str) -> str:
        if self.instance is None:
            return f"sqlite:///{self.folder / (store + '.sqlite')}"
        return self.instance.url

    def cold(self, services: list[MessageService]) -> None:
        if self.instance is not None:
            self.instance.cold()
        for service in services:  # their connections died with the server or hold a cache
            sql_engine(service.store).dispose()
        if self.instance is None:
            instances.drop_os_cache(self.folder)

    def resize(self, buffer_bytes: int) -> int:
        if self.instance is None:
            self.cache_kib = max(1, buffer_bytes // 1024)
            return self.cache_kib * 1024
        return self.instance.resize(buffer_bytes)


@contextmanager
def _target(engine: str) -> Iterator[_Target]:
    with tempfile.TemporaryDirectory(prefix="imbucket-budget-") as folder:
        if engine == "sqlite":
            yield _Target(engine, Path(folder))
            return
        instance = instances.start(engine, 128 * 1024 * 1024)  # a roomy buffer for loading
        try:
            yield _Target(engine, Path(folder), instance)
        finally:
            instance.close()


def _engine_run(
    engine: str, budget: Budget, dataset: Dataset, plans: dict[str, list[Op]], observer: Observer
) -> EngineRun:
    with _target(engine) as target, probing() as probe, ExitStack() as stack:
        services: dict[str, MessageService] = {}
        runs: dict[str, LayoutRun] = {}
        for n, store in enumerate(arms(engine)):
            label = f"{store}/{engine}"
            where = target.url(store.replace(" ", "-"))
            url = stack.enter_context(scratch_store(where, f"imbucket_budget_{n}"))
            config = {"store": {"backend": backend_of(store), "url": url, **STORE}}
            service = probe.open_service(config)
            stack.callback(service.close)
            services[store] = service
            load(service, dataset, label, observer)
            runs[store] = _sized(engine, store, service)
        row = runs["sql-row"]
        dataset_bytes = row.data_bytes + row.index_bytes
        wanted = budget.bytes_for(dataset_bytes)
        buffer = target.resize(wanted)
        result = EngineRun(engine, dataset_bytes, wanted, buffer, list(runs.values()))
        for store, service in services.items():
            _measure(target, list(services.values()), service, runs[store], plans, probe)
            observer.done(f"{store}/{engine}", "ok", "")
        return result


def load(service: MessageService, dataset: Dataset, label: str, observer: Observer) -> None:
    """The dataset into service's empty store through the bulk loader, with a progress bar."""
    observer.backend(label, dataset.messages)
    observer.workload(label, "bulk load (messages)", dataset.messages)

    def advance(count: int) -> None:
        for _ in range(count):
            observer.advance(label)

    bulk.load(service, dataset, advance)


def _sized(engine: str, store: str, service: MessageService) -> LayoutRun:
    prepare(store, service)
    stats = service.stats()
    return LayoutRun(engine, store, stats.data_bytes, stats.index_bytes, stats.messages)


def _measure(
    target: _Target,
    services: list[MessageService],
    service: MessageService,
    run: LayoutRun,
    plans: dict[str, list[Op]],
    probe: Probe,
) -> None:
    for name in (*READS, *WRITES):
        target.cold(services)
        run.cold[name] = measure_pass(service, plans[name], probe, target.cache_kib)
        if name in READS:
            run.warm[name] = measure_pass(service, plans[name], probe, target.cache_kib)


def measure_pass(
    service: MessageService, plan: list[Op], probe: Probe, cache_kib: int | None
) -> Pass:
    """Run plan's operations once on service: latency, and pages per op from a fresh meter."""
    meter = page_meter(service.store, cache_kib)
    try:
        meter.begin()
        recorder = Recorder(probe.round_trips)
        subject = Subject(service, None)
        for op in plan:
            recorder.time(op.prepare(subject), op.items)
        count = meter.pages()
    finally:
        meter.close()
    found = recorder.result()
    per = max(len(plan), 1)
    return Pass(
        found.ops,
        found.latency_us.p50,
        found.latency_us.p99,
        round(count.touched / per, 2),
        round(count.read / per, 2),
        found.errors,
    )


def markdown(results: MemoryResults) -> str:
    """The run as a Markdown report: one table per engine, cold and warm per layout."""
    lines = [
        f"# Memory budget {results.budget} — scale {results.scale}, "
        f"{results.messages:,} messages (seed {results.seed})",
        "",
        "Pages read = the engine's buffer misses per operation; cold: buffer emptied and the "
        "OS page cache of the files dropped before the workload; warm: the same operations "
        "run again at once. Latency p50 in µs.",
    ]
    for run in results.engines:
        lines += ["", f"## {run.engine}", ""]
        if run.reason:
            lines.append(f"not run: {run.reason}")
            continue
        lines.append(
            f"Dataset (row layout, data + index): {run.dataset_bytes / 2**20:,.1f} MiB; "
            f"budget {run.budget_bytes / 2**20:,.1f} MiB; buffer as run "
            f"{run.buffer_bytes / 2**20:,.1f} MiB."
        )
        lines.append("")
        for layout in run.layouts:
            lines.append(
                f"- {layout.store}: data {layout.data_bytes / 2**20:,.1f} MiB, index "
                f"{layout.index_bytes / 2**20:,.1f} MiB"
            )
        lines += ["", _table(run)]
    return "\n".join(lines) + "\n"


def _table(run: EngineRun) -> str:
    heads = ["workload"]
    for layout in run.layouts:
        heads += [f"{layout.store} cold read · p50", f"{layout.store} warm read · p50"]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name in (*READS, *WRITES):
        cells = [name]
        for layout in run.layouts:
            cells += [_cell(layout.cold.get(name)), _cell(layout.warm.get(name))]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cell(found: Pass | None) -> str:
    if found is None:
        return "—"
    return f"{found.read_per_op:,.1f} · {found.p50_us:,}"


def write(results: MemoryResults, folder: Path) -> tuple[Path, Path]:
    """memory.md and memory.json in folder; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    text, data = folder / "memory.md", folder / "memory.json"
    text.write_text(markdown(results))
    data.write_text(results.to_json())
    return text, data
