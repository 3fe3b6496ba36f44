"""A fresh send behind the Redis cache: the engine's one-step send plus the cache's invalidations.

Counted at the drivers on the cached SQL rows, opened as a configuration opens them: the
statements are the uncached ones (tests/whitebox/test_sql_round_trips.py), and the cache
adds the new seq's invalidation and, after the commit, the watermarks'.
"""

from __future__ import annotations

import pytest

from imbucket.app import MessageService
from imbucket.bench.instrument.probe import Probe
from imbucket.testing.factories import CONV, draft

CACHE = "redis"

# The step and the insert: on SQLite one transaction, on PostgreSQL each autocommitted
# (sql-row's rows ride in the step only when the service stores through the store's own
# insert; the cached store's insert invalidates the new seqs after it).
ROWS = [
    pytest.param("sql_bucket_sqlite_redis_config", id="sql-bucket-sqlite+redis"),
    pytest.param("sql_row_postgres_redis_config", id="sql-row-postgres+redis"),
]
STEP_AND_INSERT = 2
INVALIDATIONS = 2  # the new seqs, then the conversation's watermarks


@pytest.mark.parametrize("backend_config", ROWS, indirect=True)
def test_a_cached_fresh_send_costs_the_step_the_insert_and_two_invalidations(
    probed: tuple[Probe, MessageService],
) -> None:
    probe, service = probed
    service.send(CONV, [draft(0)])
    sent: list[int] = []
    count = probe.count(lambda: sent.extend(m.seq for m in service.send(CONV, [draft(1)])))
    assert sent == [2]
    store = count.without(CACHE)
    assert (store.total, store.writes) == (STEP_AND_INSERT, STEP_AND_INSERT), count
    assert count.drivers[CACHE] == INVALIDATIONS, count
    assert count.writes_by[CACHE] == INVALIDATIONS, count
