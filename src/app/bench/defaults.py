"""The benchmark's thresholds and defaults, in one place.

What counts as "on par", as a notable change between two runs, as a flat cost in a sweep,
and which bucket size stands for OpenIM's layout when several ran.
"""

from __future__ import annotations

ON_PAR_LOW = 0.8  # bucket/row p50 below this: the bucket layout is faster
ON_PAR_HIGH = 1.25  # above this: the row layout is faster; in between, on par
NOTABLE_CHANGE = 0.10  # a p50 change between two runs beyond ±10 % is worth a colour
FLAT = 0.05  # in a sweep, a change of the weighted cost by less than this is no change
OPENIM_BUCKET_SIZE = 100  # in a sweep, the size nearest this stands for the bucket layout
MAKE_BENCH_BUDGET_S = 180  # `make bench` on the embedded default must take less
DEFAULT_LABELS = ("memory", "sql-row/sqlite", "sql-bucket/sqlite")  # `make bench`'s backends


def on_par(ratio: float) -> bool:
    """Whether a bucket/row ratio means both layouts are on par."""
    return ON_PAR_LOW <= ratio <= ON_PAR_HIGH
