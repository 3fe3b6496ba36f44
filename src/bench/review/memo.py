"""The review memo: the answers first (one line per engine and regime), then the evidence.

Built once as blocks (``imbucket.bench.blocks``), so memo.md and memo.html say the same
thing; review.json holds every regime's results. The in-memory regime's own report (the one
``imbucket bench`` writes) sits in the memo's folder under in-memory/.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from imbucket.bench import answer, capacity, offered_load, scale
from imbucket.bench.blocks import (
    Block,
    Bullets,
    Heading,
    Para,
    Table,
    to_html,
    to_markdown,
    write_figures,
)
from imbucket.bench.formatting import fmt_num
from imbucket.bench.memory_budget import READS, WRITES
from imbucket.bench.review.answers import fmt_bytes, lines, plan_need, title, weights
from imbucket.bench.review.budget import REGIMES
from imbucket.bench.review.model import Review
from imbucket.bench.review.threats import threats
from imbucket.bench.scale import Point

TITLE = "imbucket review: bucket or row, per engine and regime"


def build(review: Review) -> list[Block]:
    """The memo as blocks: first screen, evidence, threats, how the budget was spent."""
    blocks: list[Block] = [Heading(1, TITLE), Para(_overview(review))]
    by_engine: dict[str, list[str]] = {}
    for engine, regime, text in lines(review):
        by_engine.setdefault(engine, []).append(f"{title(regime)}: {text}")
    for engine, said in by_engine.items():
        blocks += [Heading(2, engine), Bullets(tuple((line,) for line in said))]
    blocks += [Heading(2, "Evidence")]
    blocks += _in_memory(review)
    blocks += _out_of_memory(review)
    blocks += _growth(review)
    blocks += _contention(review)
    blocks += _capacity(review)
    blocks += [Heading(2, "Threats to validity"), Bullets(tuple((t,) for t in threats(review)))]
    blocks += _budget(review)
    return blocks


def _overview(review: Review) -> str:
    traffic = f"the profile {review.profile}" if review.profile else "the default mix"
    return (
        f"Engines {', '.join(review.engines)}; traffic: {traffic}; budget "
        f"{review.budget_s / 60:,.1f} min, {review.duration_s / 60:,.1f} min spent. One line "
        "per engine and regime: the answer there; the evidence and the threats to validity "
        "follow. bucket/row below 1: the bucket layout costs less."
    )


def _demoted(blocks: list[Block]) -> list[Block]:
    return [replace(b, level=b.level + 1) if isinstance(b, Heading) else b for b in blocks]


def _in_memory(review: Review) -> list[Block]:
    found = review.in_memory
    head: list[Block] = [Heading(3, "In memory")]
    if found is None:
        return [*head, Para("Not measured.")]
    detail = (
        f"Scale {found.parameters.scale} ({found.parameters.dataset.messages:,} messages), "
        f"{found.parameters.trials} interleaved trials per workload. The full report of this "
        "regime (every workload, footprint, pages, round trips) is in-memory/report.html."
    )
    paragraphs = [Para(a) for a in answer.answers(found)]
    return [*head, Para(detail), *paragraphs, *_demoted(offered_load.blocks(found))]


def _out_of_memory(review: Review) -> list[Block]:
    found = review.out_of_memory
    head: list[Block] = [Heading(3, "Out of memory")]
    if found is None:
        return [*head, Para("Not measured.")]
    blocks: list[Block] = [
        *head,
        Para(
            f"Scale {found.scale} ({found.messages:,} messages) under a memory budget of "
            f"{found.budget} of the rows' bytes: the engine's buffer bounded, the server "
            "restarted and the OS page cache of its files dropped before each workload (cold), "
            "then the same operations again (warm). Cells: pages read per op · p50 µs."
        ),
    ]
    for run in found.engines:
        if run.reason:
            blocks.append(Para(f"{run.engine}: not run ({run.reason})."))
            continue
        heads = ["workload"]
        for layout in run.layouts:
            heads += [f"{layout.store} cold", f"{layout.store} warm"]
        rows = []
        for name in (*READS, *WRITES):
            cells = [name]
            for layout in run.layouts:
                for passes in (layout.cold, layout.warm):
                    p = passes.get(name)
                    cells.append("–" if p is None else f"{p.read_per_op:,.1f} · {p.p50_us:,}")
            rows.append(tuple(cells))
        blocks += [
            Para(
                f"{run.engine}: buffer {run.buffer_bytes / 2**20:,.1f} MiB for "
                f"{run.dataset_bytes / 2**20:,.1f} MiB of row data and index."
            ),
            Table(tuple(heads), tuple(rows)),
        ]
    return blocks


def _growth(review: Review) -> list[Block]:
    found = review.growth
    head: list[Block] = [Heading(3, "At scale")]
    if found is None or not found.points:
        return [*head, Para("Not measured.")]
    heads = ("engine", "layout", "messages", "B/msg", *(f"{n} pages · p50" for n in READS))
    rows = tuple(
        (
            p.engine,
            p.store,
            f"{p.messages:,}",
            fmt_num(p.data_bytes_per_message + p.index_bytes_per_message, 0),
            *(f"{p.passes[n].touched_per_op:,.1f} · {p.passes[n].p50_us:,}" for n in READS),
        )
        for p in found.points
    )
    return [
        *head,
        Para(
            "Both layouts loaded by the bulk loader at each size (the shape of scale small, "
            "every count scaled), then each read workload run once warm. Cells: pages "
            "touched per op · p50 µs."
        ),
        Table(heads, rows),
        Bullets(tuple((line,) for line in scale.reading(found))),
    ]


def _contention(review: Review) -> list[Block]:
    head: list[Block] = [Heading(3, "Contention")]
    if not review.contention:
        return [*head, Para("Not measured.")]
    heads = (
        "engine",
        "layout",
        "scenario",
        "workers",
        "done",
        "ops/s",
        "p99 µs",
        "conflicts/write",
    )
    rows = []
    for found in review.contention:
        for r in found.runs:
            done = f"{r.ops}/{r.planned}" + ("" if r.ops >= r.planned else " (cut short)")
            rows.append(
                (
                    found.engine,
                    found.store,
                    r.scenario,
                    f"{r.workers} {r.mode}",
                    done,
                    fmt_num(r.ops_per_s, 0),
                    f"{r.latency_us.p99:,}",
                    fmt_num(r.conflicts_per_write, 3),
                )
            )
    about = (
        "N workers on an empty store of each layout, every run to its planned operations "
        "unless its share ran out (marked cut short; such a run is not quoted above). "
        "ops/s = completed operations ÷ wall time."
    )
    return [*head, Para(about), Table(heads, tuple(rows))]


def _capacity(review: Review) -> list[Block]:
    head: list[Block] = [Heading(3, "Capacity plan (a projection)")]
    points: dict[tuple[str, str], Point] = {}
    for p in review.growth.points if review.growth else ():
        points[(p.engine, p.store)] = p  # the largest size of each series wins
    if not points:
        return [*head, Para("Not projected: no growth point was measured.")]
    rows = []
    for (engine, store), point in points.items():
        disk, ram, pages, missing = plan_need(review, point)
        page = capacity.PAGE_BYTES.get(engine)
        read = "–" if page is None else fmt_bytes(pages * page) + "/s"
        rows.append(
            (
                engine,
                store,
                fmt_bytes(disk),
                fmt_bytes(ram),
                f"{pages:,.0f}",
                read,
                ", ".join(missing),
            )
        )
    mix = ", ".join(f"{k} {v:.0%}" for k, v in weights(review).items() if v)
    about = (
        f"{review.target_messages:,} messages and {fmt_num(review.pulls_per_s, 0)} pulls/s "
        f"with the traffic's mix ({mix}), from the largest size of the growth regime, scaled "
        f"linearly. Formulas: {capacity.FORMULAS}."
    )
    heads = ("engine", "layout", *capacity.HEADERS[1:])
    return [*head, Para(about), Table(heads, tuple(rows))]


def _budget(review: Review) -> list[Block]:
    rows = []
    for name in REGIMES:
        run = review.regime(name)
        status = "cut short" if run.was_cut else ("not run" if run.not_run else "complete")
        rows.append(
            (title(name), f"{run.share_s:,.0f} s", f"{run.spent_s:,.0f} s", run.scale, status)
        )
    heads = ("regime", "share", "spent", "ran at", "status")
    return [Heading(2, "How the budget was spent"), Table(heads, tuple(rows))]


def write(review: Review, folder: Path) -> tuple[Path, Path, Path]:
    """memo.md (with its charts), memo.html and review.json in folder; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = build(review)
    md, page, data = folder / "memo.md", folder / "memo.html", folder / "review.json"
    write_figures(blocks, folder)
    md.write_text(to_markdown(blocks))
    page.write_text(to_html(blocks, TITLE))
    data.write_text(json.dumps(review.to_json(), indent=1, ensure_ascii=False) + "\n")
    return md, page, data
