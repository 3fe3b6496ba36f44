"""Charts of a results dict, drawn with matplotlib's Agg backend into PNG bytes."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: draw into PNG bytes only

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from app.bench.analysis import Results, ok_backends, p50, pairs, ratio, trips, workload_titles

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
    results: Results,
    value: Callable[[dict[str, Any], str], float | None],
    xlabel: str,
    log: bool,
) -> bytes:
    backends = ok_backends(results)
    titles = workload_titles(results)
    names = [n for n in titles if any(value(b, n) is not None for b in backends)]
    figure, axes = plt.subplots(figsize=(10, _height(len(names) * max(1, len(backends)))))
    height = 0.8 / max(1, len(backends))
    for k, backend in enumerate(backends):
        ys = [
            len(names) - 1 - n + (len(backends) / 2 - k - 0.5) * height for n in range(len(names))
        ]
        xs = [value(backend, name) or 0 for name in names]
        axes.barh(ys, xs, height=height, label=backend["label"], color=f"C{k}")
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


def latency(results: Results) -> bytes:
    """p50 latency per workload and backend (log scale)."""
    return _grouped_barh(results, p50, "p50 latency per operation (µs, log scale)", log=True)


def round_trips(results: Results) -> bytes:
    """Round trips per operation per workload and backend."""

    def value(backend: dict[str, Any], name: str) -> float | None:
        run = backend.get("workloads", {}).get(name)
        return None if run is None else float(run["round_trips"]["per_op"])

    return _grouped_barh(results, value, "round trips per operation (mean)", log=False)


def footprint(results: Results) -> bytes:
    """Data and index bytes per stored message, per backend."""
    backends = [b for b in ok_backends(results) if "data_bytes_per_message" in _after(b)]
    labels = [b["label"] for b in backends]
    data = [_after(b)["data_bytes_per_message"] for b in backends]
    index = [_after(b)["index_bytes_per_message"] for b in backends]
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


def _after(backend: dict[str, Any]) -> dict[str, Any]:
    footprint: dict[str, Any] = backend.get("footprint", {}).get("after_ingest", {})
    return footprint


def ratios(results: Results) -> bytes | None:
    """bucket/row p50 ratio per workload on each engine; None when no pair ran."""
    found = pairs(results)
    if not found:
        return None
    titles = workload_titles(results, layouts_only=True)
    names = [n for n in titles if any(p50(p.bucket, n) and p50(p.row, n) for p in found)]
    figure, axes = plt.subplots(figsize=(10, _height(len(names) * len(found))))
    height = 0.8 / len(found)
    for k, pair in enumerate(found):
        ys = [len(names) - 1 - n + (len(found) / 2 - k - 0.5) * height for n in range(len(names))]
        xs = [ratio(p50(pair.bucket, n), p50(pair.row, n)) or 1.0 for n in names]
        axes.barh(ys, [x - 1 for x in xs], left=1, height=height, label=pair.name, color=f"C{k}")
        for y, x in zip(ys, xs, strict=True):
            axes.text(x, y, f" {x:.2f}× ", va="center",
                      ha="left" if x >= 1 else "right", fontsize=7)  # fmt: skip
    axes.axvspan(0.8, 1.25, color="0.92", zorder=0, label="on par (0.8–1.25×)")
    axes.axvline(1, color="black", linewidth=1)
    axes.set_xscale("log")
    times = FuncFormatter(lambda value, _: f"{value:g}×")
    axes.xaxis.set_major_formatter(times)
    axes.xaxis.set_minor_formatter(times)
    axes.tick_params(axis="x", which="minor", labelsize=7)
    axes.set_yticks(range(len(names)), [titles[n] for n in reversed(names)])
    axes.set_xlabel("bucket p50 / row p50   (left of 1: bucket faster, right: row faster)")
    _finish(axes)
    return _png(figure)


def contention(results: Results) -> bytes:
    """Throughput against workers, one panel per scenario; dashed lines are processes."""
    from app.bench import concurrency

    names = concurrency.scenarios(results)
    backends = [b for b in ok_backends(results) if b.get("contention")]
    figure, panels = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for axes, scenario in zip(panels[0], names, strict=True):
        for k, backend in enumerate(backends):
            xs, ys = concurrency.series(backend, scenario, "threads")
            axes.plot(xs, ys, marker="o", color=f"C{k}", label=f"{backend['label']} threads")
            px, py = concurrency.series(backend, scenario, "processes")
            if px:
                start = ([xs[0]], [ys[0]]) if xs and xs[0] < px[0] else ([], [])
                axes.plot(start[0] + px, start[1] + py, marker="s", linestyle="--",
                          color=f"C{k}", label=f"{backend['label']} processes")  # fmt: skip
        counts = concurrency.workers(results)
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


def sweep(results: Results, series: Any, weights: dict[str, float]) -> bytes:
    """One engine of a bucket-size sweep: p50, round trips and bytes per message vs size."""
    from app.bench import sweep as sweeping

    titles = workload_titles(results, layouts_only=True)
    names = [n for n in sweeping.common_workloads(series, dict.fromkeys(titles, 1.0))]
    figure, (lat, rts, size) = plt.subplots(1, 3, figsize=(14, 4.4))
    sizes = list(series.sizes)
    for k, name in enumerate(names):
        style = {"color": f"C{k % 10}", "marker": "o", "linestyle": "-" if k < 10 else ":"}
        lat.plot(sizes, [p50(b, name) for b in series.buckets], label=titles[name], **style)
        rts.plot(sizes, [trips(b, name) for b in series.buckets], **style)
    costs = sweeping.costs(series, weights)
    if all(c is not None for c in costs):
        lat.plot(sizes, costs, color="black", linewidth=2.5, label="this traffic's mix (weighted)")
    row_cost = sweeping.row_cost(series, weights)
    if row_cost:
        lat.axhline(row_cost, color="black", linestyle="--", linewidth=1, label="row layout, mix")
    footprints = [sweeping.footprint(b) for b in series.buckets]
    if all(footprints):
        size.plot(sizes, [f["data_bytes_per_message"] for f in footprints], marker="o",
                  color="C0", label="bucket data")  # fmt: skip
        size.plot(sizes, [f["index_bytes_per_message"] for f in footprints], marker="o",
                  color="C3", label="bucket index")  # fmt: skip
        row = sweeping.footprint(series.row) if series.row else {}
        if row:
            size.axhline(row["data_bytes_per_message"], color="C0", linestyle="--",
                         label="row data")  # fmt: skip
            size.axhline(row["index_bytes_per_message"], color="C3", linestyle="--",
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
