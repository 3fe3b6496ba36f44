"""The benchmark's thresholds and defaults, in one place.

What counts as "on par", as a notable change between two runs, as a flat cost in a sweep,
which bucket size stands for OpenIM's layout when several ran, and the targets' limits.
"""

from __future__ import annotations

ON_PAR_LOW = 0.8  # bucket/row p50 below this: the bucket layout is faster
ON_PAR_HIGH = 1.25  # above this: the row layout is faster; in between, on par
NOTABLE_CHANGE = 0.10  # a p50 change between two runs beyond ±10 % is worth a colour
FLAT = 0.05  # in a sweep, a change of the weighted cost by less than this is no change
OPENIM_BUCKET_SIZE = 100  # in a sweep, the size nearest this stands for the bucket layout
# ingest times the last quarter of the dataset's batches; the bulk loader writes the rest
# first, untimed: a steady-state ingest into stores that already hold most of the data.
INGEST_TIMED_SHARE = 0.25
MAKE_BENCH_BUDGET_S = 180  # `make bench` on the embedded default must take less
# `make bench`'s backends
DEFAULT_LABELS = ("memory", "sql-row/sqlite", "sql-bucket/sqlite", "sql-bucket/sqlite[openim]")

# The targets (imbucket.bench.targets); the five core targets (goals 1–5) first.
PULL_MAX_TRIPS = 1  # pull_latest, pull_range and pull: watermarks and data in one round trip
OVERHEAD_MAX = 1.5  # service p50 vs the raw-driver arm of the same pull, every layout
ROW_OVERHEAD_MAX = 1.2  # the row layout's pull_latest(20) vs its raw arm, every SQL engine
DELETER_BYTES_MAX = 1.2  # bytes received pulling a slot with many deleters vs with none
BUCKET_BYTES_MAX = 1.0  # bucket data+index bytes per message vs the row layout's
TAG_MAX_TRIPS = 2  # a tag write: the permission read and one conditional write
CLEAR_GROWTH_MAX = 1.5  # clear_history p50 on the largest conversation vs a small one
INDEX_SHARE_MAX = 1 / 20  # sql-bucket index bytes per message vs sql-row's
SEND_OVERHEAD_MAX = 2.0  # raw driver's send calls/s vs the service's, every cell of a backend
