"""Charts of a run's results, drawn with matplotlib's Agg backend into PNG bytes."""

from __future__ import annotations

import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")  # no display: draw into PNG bytes only

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from imbucket.bench.analysis import Pair, pairs
from imbucket.bench.defaults import ON_PAR_HIGH, ON_PAR_LOW
from imbucket.bench.results import BackendResult, RunResults
from imbucket.bench.sweep import Series

_DPI = 100


def _height(bars: int) -> float:
    """Figure height in inches for a number of horizontal bars."""
    return max(2.5, 1.0 + 0.2 * bars)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=_DPI)
    plt.close(figure)
    return buffer.getvalue()


def _grouped_barh(
    results: RunResults,
    value: Callable[[BackendResult, str], float | None],
    xlabel: str,
    log: bool,
) -> bytes:
    # memory is the in-process reference, shown apart: it would stretch the log scales
    backends = [b for b in results.ok_backends() if b.family != "memory"]
    titles = results.parameters.titles()
    names = [n for n in titles if any(value(b, n) is not None for b in backends)]
    figure, axes = plt.subplots(figsize=(10, _height(len(names) * max(1, len(backends)))))
    height = 0.8 / max(1, len(backends))
    for k, backend in enumerate(backends):
        ys = [
            len(names) - 1 - n + (len(backends) / 2 - k - 0.5) * height for n in range(len(names))
        ]
        xs = [value(backend, name) or 0 for name in names]
        axes.barh(ys, xs, height=height, label=backend.label, color=f"C{k}")
    axes.set_yticks(range(len(names)), [titles[n] for n in reversed(names)])
    axes.set_xlabel(xlabel)
    if log:
        axes.set_xscale("log")
    _finish(axes)
    return _png(figure)


def _finish(axes: Axes) -> None:
    axes.grid(axis="x", alpha=0.3)
    axes.set_axisbelow(True)
    axes.legend(fontsize=8, loc="best")
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


def latency(results: RunResults) -> bytes:
    """p50 latency per workload and backend (log scale)."""
    return _grouped_barh(
        results, BackendResult.p50, "p50 latency per operation (µs, log scale)", log=True
    )


def round_trips(results: RunResults) -> bytes:
    """Round trips per operation per workload and backend."""
    return _grouped_barh(
        results, BackendResult.trips, "round trips per operation (mean)", log=False
    )


def footprint(results: RunResults) -> bytes:
    """Data and index bytes per stored message, per backend."""
    measured = [(b.label, b.footprint.measured()) for b in results.ok_backends()]
    found = [(label, f) for label, f in measured if f is not None]
    labels = [label for label, _ in found]
    data = [f.data_bytes_per_message for _, f in found]
    index = [f.index_bytes_per_message for _, f in found]
    figure, axes = plt.subplots(figsize=(10, _height(2 * len(labels))))
    axes.barh(labels, data, color="C0", label="data")
    axes.barh(labels, index, left=data, color="C3", label="index")
    for y, (d, i) in enumerate(zip(data, index, strict=True)):
        axes.text(d + i, y, f"  {d:.0f} + {i:.1f} B", va="center", fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("bytes per stored message after ingest (data + index)")
    axes.set_xlim(0, max([d + i for d, i in zip(data, index, strict=True)] or [1]) * 1.3)
    _finish(axes)
    return _png(figure)


def whiskers(pair: Pair, names: list[str]) -> tuple[list[float], list[float]]:
    """How far each workload's 95 % interval reaches below and above its ratio (0 when none)."""
    below, above = [], []
    for name in names:
        found, point = pair.interval(name), pair.ratio(name) or 1.0
        below.append(max(0.0, point - found.low) if found else 0.0)
        above.append(max(0.0, found.high - point) if found else 0.0)
    return below, above


def ratios(results: RunResults) -> bytes | None:
    """bucket/row p50 ratio per workload on each engine; None when no pair ran."""
    found = pairs(results)
    if not found:
        return None
    titles = results.parameters.titles(layouts_only=True)
    names = [n for n in titles if any(p.bucket.p50(n) and p.row.p50(n) for p in found)]
    figure, axes = plt.subplots(figsize=(10, _height(len(names) * len(found))))
    height = 0.8 / len(found)
    shown = [ON_PAR_LOW, ON_PAR_HIGH]
    for k, pair in enumerate(found):
        ys = [len(names) - 1 - n + (len(found) / 2 - k - 0.5) * height for n in range(len(names))]
        xs = [pair.ratio(n) or 1.0 for n in names]
        below, above = whiskers(pair, names)
        shown += [x + a for x, a in zip(xs, above, strict=True)]
        shown += [x - b for x, b in zip(xs, below, strict=True)]
        axes.barh(ys, [x - 1 for x in xs], left=1, height=height, label=pair.name, color=f"C{k}",
                  xerr=[below, above], error_kw={"elinewidth": 0.8, "capsize": 2})  # fmt: skip
        for y, x, b, a in zip(ys, xs, below, above, strict=True):  # labels beyond the whiskers
            axes.text(x + a if x >= 1 else x - b, y, f" {x:.2f}× ", va="center",
                      ha="left" if x >= 1 else "right", fontsize=7)  # fmt: skip
    axes.axvspan(
        ON_PAR_LOW,
        ON_PAR_HIGH,
        color="0.92",
        zorder=0,
        label=f"on par ({ON_PAR_LOW}–{ON_PAR_HIGH}×)",
    )
    axes.axvline(1, color="black", linewidth=1)
    axes.set_xscale("log")
    axes.set_xlim(min(shown) / 1.3, max(shown) * 1.3)  # room for the labels beside the bars
    times = FuncFormatter(lambda value, _: f"{value:g}×")
    axes.xaxis.set_major_formatter(times)
    axes.xaxis.set_minor_formatter(times)
    axes.tick_params(axis="x", which="minor", labelsize=7)
    axes.set_yticks(range(len(names)), [titles[n] for n in reversed(names)])
    axes.set_xlabel("bucket p50 / row p50   (left of 1: bucket faster, right: row faster)")
    _finish(axes)
    return _png(figure)


def contention(results: RunResults) -> bytes:
    """Throughput against workers, one panel per scenario; dashed lines are processes."""
    from imbucket.bench import concurrency

    every = results.ok_backends()
    names = concurrency.scenarios(every)
    backends = [b for b in every if b.contention]
    figure, panels = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for axes, scenario in zip(panels[0], names, strict=True):
        for k, backend in enumerate(backends):
            xs, ys = concurrency.series(backend, scenario, "threads")
            axes.plot(xs, ys, marker="o", color=f"C{k}", label=f"{backend.label} threads")
            px, py = concurrency.series(backend, scenario, "processes")
            if px:
                start = ([xs[0]], [ys[0]]) if xs and xs[0] < px[0] else ([], [])
                axes.plot(start[0] + px, start[1] + py, marker="s", linestyle="--",
                          color=f"C{k}", label=f"{backend.label} processes")  # fmt: skip
        counts = concurrency.workers(every)
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xticks(counts, [str(n) for n in counts])
        axes.minorticks_off()
        axes.set_title(concurrency.SCENARIO_TITLES[scenario], fontsize=10)
        axes.set_xlabel("concurrent workers (N)")
        axes.grid(alpha=0.3)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    panels[0][0].set_ylabel("operations per second (log)")
    handles, labels = panels[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    figure.tight_layout(rect=(0, 0.08 + 0.04 * ((len(labels) - 1) // 4), 1, 1))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    plt.close(figure)
    return buffer.getvalue()


def sweep(results: RunResults, series: Series, weights: dict[str, float]) -> bytes:
    """One engine of a bucket-size sweep: p50, round trips and bytes per message vs size."""
    from imbucket.bench import sweep as sweeping

    titles = results.parameters.titles(layouts_only=True)
    names = [n for n in sweeping.common_workloads(series, dict.fromkeys(titles, 1.0))]
    figure, (lat, rts, size) = plt.subplots(1, 3, figsize=(14, 4.4))
    sizes = list(series.sizes)
    for k, name in enumerate(names):
        style = {"color": f"C{k % 10}", "marker": "o", "linestyle": "-" if k < 10 else ":"}
        lat.plot(sizes, [b.p50(name) for b in series.buckets], label=titles[name], **style)
        rts.plot(sizes, [b.trips(name) for b in series.buckets], **style)
    costs = sweeping.costs(series, weights)
    if all(c is not None for c in costs):
        lat.plot(sizes, costs, color="black", linewidth=2.5, label="this traffic's mix (weighted)")
    row_cost = sweeping.row_cost(series, weights)
    if row_cost:
        lat.axhline(row_cost, color="black", linestyle="--", linewidth=1, label="row layout, mix")
    footprints = [b.footprint.measured() for b in series.buckets]
    measured = [f for f in footprints if f is not None]
    if len(measured) == len(footprints):
        size.plot(sizes, [f.data_bytes_per_message for f in measured], marker="o",
                  color="C0", label="bucket data")  # fmt: skip
        size.plot(sizes, [f.index_bytes_per_message for f in measured], marker="o",
                  color="C3", label="bucket index")  # fmt: skip
        row = series.row.footprint.measured() if series.row else None
        if row is not None:
            size.axhline(row.data_bytes_per_message, color="C0", linestyle="--",
                         label="row data")  # fmt: skip
            size.axhline(row.index_bytes_per_message, color="C3", linestyle="--",
                         label="row index")  # fmt: skip
    for axes, label in (
        (lat, "p50 per operation (µs, log)"),
        (rts, "round trips per operation"),
        (size, "bytes per stored message (log)"),
    ):
        axes.set_xscale("log")
        axes.set_xticks(sizes, [str(s) for s in sizes])
        axes.minorticks_off()
        axes.set_xlabel("slots per bucket")
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    lat.set_yscale("log")
    size.set_yscale("log")
    size.legend(fontsize=8)
    handles, labels = lat.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    rows = (len(labels) + 4) // 5
    figure.tight_layout(rect=(0, 0.05 * rows + 0.02, 1, 1))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI)
    plt.close(figure)
    return buffer.getvalue()
