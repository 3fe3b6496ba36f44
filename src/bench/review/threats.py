"""The memo's "threats to validity", generated from what the review measured and left out."""

from __future__ import annotations

from imbucket.bench.memory_budget import READS, WRITES
from imbucket.bench.review.answers import title, weights
from imbucket.bench.review.model import Review


def threats(review: Review) -> list[str]:
    """One item per threat, each saying what it is in this run and what it means."""
    return [
        _load(review),
        *_cut(review),
        _emulated(review),
        *_unmeasured(review),
        _in_cache(review),
        _one_pass(review),
        _projection(review),
        _servers(review),
    ]


def _load(review: Review) -> str:
    found = review.load
    if found is None or found.others_cpu_share is None:
        return "Machine load: not measured on this system; read close ratios with care."
    average = "/".join(f"{v:g}" for v in found.load_start) or "?"
    said = (
        f"Machine load: other processes used {found.others_cpu_share:.0%} of the CPU time "
        f"during the review (load average {average} at the start, {found.cpu_count} cores)."
    )
    if found.busy:
        return said + (
            " That is a busy machine: latencies are inflated and noisier; page counts and "
            "bytes are not. Rerun on an idle machine before trusting a close latency."
        )
    return said + " Latencies are not inflated by a busy machine to any degree the run could see."


def _cut(review: Review) -> list[str]:
    cut = [r for r in review.regimes.values() if r.was_cut]
    if not cut:
        return ["Cut-short runs: none; every regime finished within its share of the budget."]
    return [
        f"Cut short ({title(r.regime)}, its share of {r.share_s:,.0f} s spent): "
        + "; ".join(r.cut_short)
        + ". What did not run is not quoted; a larger --budget runs it."
        for r in cut
    ]


def _emulated(review: Review) -> str:
    found = review.in_memory
    emulated = sorted({b.label for b in found.ok_backends() if b.emulated}) if found else []
    mongo = [e for e in review.engines if e.startswith("mongo")]
    if emulated or mongo:
        names = ", ".join(emulated or mongo)
        return (
            f"Emulated engines: {names} ran on an emulator of the wire protocol (mongoeco), "
            "whose latencies, bytes and concurrency are the emulator's, not a real server's; "
            "the out-of-memory and growth regimes measure SQL engines only."
        )
    return "Emulated engines: none; every engine ran as its own server or library."


def _unmeasured(review: Review) -> list[str]:
    mix = {n: w for n, w in weights(review).items() if w}
    said = []
    found = review.in_memory
    ran = (
        {n for b in found.ok_backends() for n, r in b.workloads.items() if r.ops}
        if found
        else set()
    )
    missing = sorted(set(mix) - ran)
    if found is not None and missing:
        share = sum(mix[n] for n in missing)
        said.append(
            f"Unmeasured workloads in memory: {', '.join(missing)} ({share:.0%} of the mix) did "
            "not run at this scale (the dataset has nothing of that size), so the in-memory "
            "answer is over the rest of the mix."
        )
    measured = {*READS, *WRITES}
    outside = sorted(set(mix) - measured)
    if outside:
        share = sum(mix[n] for n in outside)
        said.append(
            f"Unmeasured workloads out of memory and at scale: those regimes time "
            f"{', '.join(sorted(measured))}; {', '.join(outside)} ({share:.0%} of the mix) are "
            "left out of their lines, and of the capacity plan's pages/s."
        )
    return said


def _in_cache(review: Review) -> str:
    found = review.in_memory
    if found is None:
        return "In-cache regime: not measured."
    messages = found.parameters.dataset.messages
    return (
        f"In-cache regime: the in-memory comparison holds {messages:,} messages, which fit in "
        "every engine's cache, so its latencies are those of a working set in memory. Where "
        "the data outgrows memory, the out-of-memory line is the one to read."
    )


def _one_pass(review: Review) -> str:
    return (
        "One pass: the out-of-memory and growth regimes run each workload's operations once "
        "(cold, then warm), so their latencies carry no interval; their verdict words rest on "
        "page counts, which do not depend on machine load."
    )


def _projection(review: Review) -> str:
    largest = max((p.messages for p in review.growth.points), default=0) if review.growth else 0
    if not largest:
        return "Capacity plan: no growth point was measured, so nothing was projected."
    factor = review.target_messages / largest
    return (
        f"Capacity plan: a linear projection to {review.target_messages:,} messages from "
        f"{largest:,} ({factor:,.0f}× beyond the largest size measured), as if bytes and pages "
        "per message stayed flat; the growth lines show how flat they stayed."
    )


def _servers(review: Review) -> str:
    if not review.private:
        return "Servers: SQLite runs in process on a file; no server settings were tuned."
    named = ", ".join(f"{e} ({how})" for e, how in review.private.items())
    return (
        f"Servers: {named}; defaults otherwise, no tuning beyond the buffer. A tuned production "
        "server may move both layouts."
    )
