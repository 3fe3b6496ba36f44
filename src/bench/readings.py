"""Generated text: what each bucket/row ratio means, and one verdict sentence per engine."""

from __future__ import annotations

from collections.abc import Iterator

from imbucket.bench import stats
from imbucket.bench.analysis import Pair, index_ratio
from imbucket.bench.defaults import ON_PAR_HIGH
from imbucket.bench.formatting import fmt_num, fmt_ratio, fmt_us

# What each workload stands for in a design review.
MEANING = {
    "ingest": "The write path of every message: one conditional write per bucket and batch vs "
    "one row per message.",
    "redeliver": "Idempotent redelivery: the cost of detecting duplicates without writing.",
    "pull_latest": "Opening a chat, the hottest read: the bucket layout's main promise.",
    "pull_range": "Scrolling back 100 messages: one or two buckets vs 100 rows.",
    "pull_scattered": "Random seqs touch up to 20 buckets: the bucket layout's worst read.",
    "revoke": "A tag write: a slot rewritten inside its bucket vs one row updated.",
    "delete_for_me": "Per-user tags: a set-add inside a bucket vs a row in a deletions table.",
    "pull_hot": "One message pulled by a viewer who deleted nothing, before anyone did.",
    "pull_hot_deleted": "The same pull once many users deleted the message: whatever the read "
    "ships of the deleters shows here.",
    "hot_delete": "One slot's deleted-by list grows with every user, and so does each bucket "
    "rewrite.",
    "hot_delete_spilled": "Past the inline cap a bucket store writes each deleter to its side "
    "table: the cost of a spill vs one more deletion row.",
    "mark_read": "A read receipt over the latest messages: one bucket patch vs up to 20 rows.",
    "purge": "Physical delete: slots cleared inside a bucket vs rows wiped.",
    "clear_small": "Clear history is a watermark write in both layouts.",
    "clear_largest": "Clear history is a watermark write in both layouts, whatever the size.",
}
_ON_PAR = f"within {ON_PAR_HIGH - 1:.0%}".replace("%", " %")


def reading(pair: Pair, workload: str, title: str) -> tuple[str, str] | None:
    """Two lines saying what the bucket/row ratio of one workload means on one engine."""
    bucket, row = pair.bucket.p50(workload), pair.row.p50(workload)
    value = pair.ratio(workload)
    if value is None:
        return None
    found = pair.interval(workload)
    word = stats.verdict(found)
    if word == stats.FASTER:
        verdict = f"the bucket layout is {1 / value:.1f}× faster"
    elif word == stats.SLOWER:
        verdict = f"the row layout is {value:.1f}× faster"
    elif word == stats.ON_PAR:
        verdict = f"both layouts are on par ({_ON_PAR})"
    else:
        verdict = "inconclusive: the interval straddles the on-par band"
    first = (
        f"{title} on {pair.name}: p50 {fmt_us(bucket)} (bucket) vs {fmt_us(row)} (row), "
        f"ratio {stats.fmt_interval(found)} (95 % interval): {verdict}."
    )
    second = f"{_why(pair, workload, value, word)} {MEANING.get(workload, '')}".strip()
    return first, second


def _why(pair: Pair, workload: str, value: float, word: str) -> str:
    """Whether round trips explain the gap, or the work per round trip does.

    Only a gap the verdict found (faster or slower) is explained: on par or inconclusive,
    the round trips are stated and no direction is read into the point estimate.
    """
    tb, tr = pair.bucket.trips(workload), pair.row.trips(workload)
    if tb is None or tr is None or abs(tb - tr) < 0.05:
        both = f"Both need {fmt_num(tb)} round trip{'' if tb == 1 else 's'} per op"
        return both + (", so the gap is the work per round trip." if _gap(word) else ".")
    fewer, faster = tb < tr, value < 1
    more = "fewer" if fewer else "more"
    why = f"It needs {more} round trips ({fmt_num(tb)} vs {fmt_num(tr)})"
    if not _gap(word):
        return why + " per op."
    if fewer == faster:
        return why + ", which accounts for part of the gap."
    cost = "cheaper" if faster else "dearer"
    return why + f", so each of its round trips is {cost} than the row layout's."


def _gap(word: str) -> bool:
    return word in (stats.FASTER, stats.SLOWER)


def verdict_summary(pair: Pair, titles: dict[str, str]) -> str:
    """One sentence: on which workloads each layout wins, and the index size ratio."""
    by_word: dict[str, list[str]] = {}
    for name, title in titles.items():
        if pair.ratio(name) is not None:
            by_word.setdefault(pair.verdict(name), []).append(title)
    faster, slower = by_word.get(stats.FASTER, []), by_word.get(stats.SLOWER, [])
    even, unsure = by_word.get(stats.ON_PAR, []), by_word.get(stats.INCONCLUSIVE, [])
    total = len(faster) + len(slower) + len(even) + len(unsure)
    parts = [f"On {pair.name} the bucket layout is faster on {len(faster)} of {total} workloads"]
    if faster:
        parts[0] += f" ({', '.join(faster)})"
    parts.append(f"slower on {len(slower)}" + (f" ({', '.join(slower)})" if slower else ""))
    parts.append(f"on par on {len(even)}")
    parts.append(f"inconclusive on {len(unsure)}")
    data, index = index_ratio(pair)
    text = ", ".join(parts) + "."
    if index is not None and data is not None:
        text += f" It stores {fmt_ratio(data)} the data bytes and {fmt_ratio(index)} the index "
        text += "bytes per message of the row layout."
    return text


def pair_rows(pair: Pair, titles: dict[str, str]) -> Iterator[list[str]]:
    """Table rows of one pair: workload, p50s, ratio [95 % interval], verdict, round trips."""
    for name, title in titles.items():
        row, bucket = pair.row.p50(name), pair.bucket.p50(name)
        if row is None and bucket is None:
            continue
        yield [
            title,
            fmt_us(row),
            fmt_us(bucket),
            stats.fmt_interval(pair.interval(name)),
            pair.verdict(name) if pair.ratio(name) is not None else "–",
            f"{fmt_num(pair.row.trips(name))} → {fmt_num(pair.bucket.trips(name))}",
        ]
