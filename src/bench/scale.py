"""The scale curve: bytes per message, pages per operation and p50 at several dataset sizes.

``imbucket bench --scales 10k,100k,1m`` builds, for each size, a dataset shaped like scale
``small`` (the same mix of 1:1 chats, groups and one giant group, every count scaled), loads
it with the bulk loader (``imbucket.bench.bulk``: the state ``ingest`` leaves) into both SQL
layouts of each engine (and, on PostgreSQL, the rows clustered: ``memory_budget.arms``), and
measures the read workloads and a tag write warm (each one pass right after another). It
writes scale.json, scale.md (a table and a generated reading) and a log-log chart (scale.png).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from imbucket.bench.dataset import SCALES, Dataset, Scale
from imbucket.bench.instrument.probe import probing
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.bench.memory_budget import (
    READS,
    STORE,
    WRITES,
    Pass,
    arms,
    backend_of,
    load,
    measure_pass,
    prepare,
)
from imbucket.bench.runner import Observer
from imbucket.bench.workloads import WORKLOADS, Op
from imbucket.domain.errors import ConfigError

_COUNT = re.compile(r"^(\d+(?:\.\d+)?)([km]?)$", re.IGNORECASE)
OPS = 300  # operations per measured workload at every size


def parse_scales(text: str) -> tuple[int, ...]:
    """``10k,100k,1m`` as message counts, ascending; ConfigError on anything else."""
    sizes = []
    for part in text.split(","):
        match = _COUNT.match(part.strip())
        if match is None:
            raise ConfigError(f"scale {part!r} is not a count like 10k, 100k, 1m or 2500")
        factor = {"": 1, "k": 1_000, "m": 1_000_000}[match[2].lower()]
        sizes.append(int(float(match[1]) * factor))
    if not sizes or min(sizes) < 1_000:
        raise ConfigError("scales start at 1k messages")
    return tuple(sorted(set(sizes)))


def scaled(messages: int) -> Scale:
    """Scale ``small`` stretched to about messages messages (same shape, counts scaled)."""
    base = SCALES["small"]
    f = messages / Dataset(base).messages
    return replace(
        base,
        name=f"{messages:,}",
        single_chats=max(10, round(base.single_chats * f)),
        groups=max(2, round(base.groups * f)),
        group_messages=max(100, round(base.group_messages * f)),
        giants=tuple(max(100, round(g * f)) for g in base.giants),
        users=max(50, round(base.users * f)),
        ops=OPS,
    )


@dataclass
class Point:
    """One layout on one engine at one size."""

    engine: str
    store: str
    messages: int
    data_bytes_per_message: float
    index_bytes_per_message: float
    index_bytes: int
    passes: dict[str, Pass] = field(default_factory=dict)


@dataclass
class ScaleResults:
    """What ``imbucket bench --scales`` measured (scale.json)."""

    seed: int
    budget_bytes: int  # where an index stops fitting
    points: list[Point] = field(default_factory=list)

    def to_json(self) -> str:
        """scale.json's text."""
        return json.dumps(asdict(self), indent=2)


def run(
    urls: dict[str, str],
    sizes: tuple[int, ...],
    seed: int,
    budget: int,
    observer: Observer,
    measured: Callable[[ScaleResults], object] = lambda _: None,
) -> ScaleResults:
    """Measure each engine (name -> server URL, "" for an SQLite file) at each size.

    measured is called with the results so far after every point (the CLI writes its files
    then, so that a run stopped part-way keeps what it measured).
    """
    results = ScaleResults(seed, budget)
    wanted = {*READS, *WRITES}
    for size in sizes:
        dataset = Dataset(scaled(size), seed)
        plans = {w.name: w.plan(dataset) for w in WORKLOADS if w.name in wanted}
        for engine, url in urls.items():
            for n, store in enumerate(arms(engine)):
                namespace = f"imbucket_scale_{size}_{n}"
                point = _point(engine, url, store, namespace, dataset, plans, observer)
                results.points.append(point)
                measured(results)
    return results


def _point(
    engine: str,
    url: str,
    store: str,
    namespace: str,
    dataset: Dataset,
    plans: dict[str, list[Op]],
    observer: Observer,
) -> Point:
    label = f"{store}/{engine}"
    with tempfile.TemporaryDirectory(prefix="imbucket-scale-") as folder, ExitStack() as stack:
        probe = stack.enter_context(probing())
        where = url or f"sqlite:///{Path(folder) / (store + '.sqlite')}"
        scratch = stack.enter_context(scratch_store(where, namespace))
        config = {"store": {"backend": backend_of(store), "url": scratch, **STORE}}
        service = probe.open_service(config)
        stack.callback(service.close)
        load(service, dataset, label, observer)
        prepare(store, service)
        stats = service.stats()
        per = max(stats.messages, 1)
        point = Point(
            engine,
            store,
            stats.messages,
            round(stats.data_bytes / per, 1),
            round(stats.index_bytes / per, 2),
            stats.index_bytes,
        )
        for name in (*READS, *WRITES):
            point.passes[name] = measure_pass(service, plans[name], probe, None)
        observer.done(label, "ok", f"{stats.messages:,} messages")
        return point


def reading(results: ScaleResults) -> list[str]:
    """Generated sentences: which costs stay flat, which grow, where an index stops fitting."""
    lines = []
    series: dict[tuple[str, str], list[Point]] = {}
    for p in results.points:
        series.setdefault((p.engine, p.store), []).append(p)
    for (engine, store), points in series.items():
        first, last = points[0], points[-1]
        if first is last:
            continue
        growth = last.messages / first.messages
        for name in (*READS, *WRITES):
            if first.passes[name].ops == 0:
                continue  # nothing of this kind at the smallest size
            a, b = first.passes[name].touched_per_op, last.passes[name].touched_per_op
            trend = _trend(a, b)
            lines.append(
                f"{store}/{engine} {name}: pages touched per op {a:,.1f} → {b:,.1f} over "
                f"{growth:,.0f}× the messages ({trend})"
            )
        over = [p for p in points if p.index_bytes > results.budget_bytes]
        if over:
            lines.append(
                f"{store}/{engine}: its index ({over[0].index_bytes / 2**20:,.1f} MiB) stops "
                f"fitting a {results.budget_bytes / 2**20:,.0f} MiB buffer at "
                f"{over[0].messages:,} messages"
            )
        else:
            lines.append(
                f"{store}/{engine}: its index fits a {results.budget_bytes / 2**20:,.0f} MiB "
                f"buffer at every size measured ({last.index_bytes / 2**20:,.1f} MiB at most)"
            )
    return lines


def _trend(a: float, b: float) -> str:
    if a <= 0:
        return "grows" if b > 0 else "flat"
    change = b / a
    return "flat" if 0.8 <= change <= 1.25 else ("grows" if change > 1 else "shrinks")


def markdown(results: ScaleResults) -> str:
    """The table (one row per engine, layout and size) and the reading."""
    heads = ["engine", "layout", "messages", "data B/msg", "index B/msg"]
    heads += [f"{n} pages · p50 µs" for n in (*READS, *WRITES)]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for p in results.points:
        cells = [p.engine, p.store, f"{p.messages:,}", f"{p.data_bytes_per_message:,.1f}"]
        cells.append(f"{p.index_bytes_per_message:,.2f}")
        for name in (*READS, *WRITES):
            found = p.passes[name]
            cells.append(f"{found.touched_per_op:,.1f} · {found.p50_us:,}")
        rows.append("| " + " | ".join(cells) + " |")
    reading_lines = [f"- {line}" for line in reading(results)]
    return "\n".join(["# Scale curve", "", *rows, "", "## Reading", "", *reading_lines]) + "\n"


def chart(results: ScaleResults, path: Path) -> None:
    """Log-log chart: pages touched per pull_range and p50 against messages, per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (pages, latency) = plt.subplots(1, 2, figsize=(11, 4.5))
    series: dict[str, list[Point]] = {}
    for p in results.points:
        series.setdefault(f"{p.store}/{p.engine}", []).append(p)
    for label, points in series.items():
        x = [p.messages for p in points]
        for name in READS:
            pages.plot(x, [max(p.passes[name].touched_per_op, 0.1) for p in points], "o-",
                       label=f"{label} {name}")  # fmt: skip
            latency.plot(x, [max(p.passes[name].p50_us, 1) for p in points], "o-",
                         label=f"{label} {name}")  # fmt: skip
    for axis, title in ((pages, "pages touched per op"), (latency, "p50 µs")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("messages")
        axis.set_title(title)
    pages.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(results: ScaleResults, folder: Path) -> list[Path]:
    """scale.md, scale.json and scale.png in folder."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [folder / "scale.md", folder / "scale.json", folder / "scale.png"]
    files[0].write_text(markdown(results))
    files[1].write_text(results.to_json())
    chart(results, files[2])
    return files
