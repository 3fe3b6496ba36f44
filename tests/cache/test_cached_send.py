"""A SQL service behind the cache keeps the backend's one-step send and fused mark-read.

Wired as the container wires a cache (``app.backends.cached``), on SQLite: a fresh send is
the step and the insert in one transaction, after which the cached watermarks are dropped, so
the next pull sees the new message; a mark-read raises the read seq in its tag write's read
and invalidates the seqs it changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.adapters.timeouts import Timeouts
from imbucket.app import MessageService, backends
from imbucket.bench.instrument.roundtrips import RoundTrips, watch
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Draft, SessionType
from imbucket.domain.projection import MessageView
from imbucket.ports.fresh_sends import StoringFreshSends
from imbucket.testing import factories
from tests.cache.cases import CONV
from tests.cache.conftest import NOW_MS, commands

Factory = Callable[..., backends.Backend]
STORES: dict[str, Factory] = {"sql-row": backends.sql_row, "sql-bucket": backends.sql_bucket}


def draft(n: int) -> Draft:
    """A draft alice sends bob (a single chat: pulls show whether bob read it)."""
    return factories.draft(n, session_type=SessionType.SINGLE, recv_id="bob", group_id="")


@pytest.fixture(params=list(STORES))
def wired(request: pytest.FixtureRequest, cache: RedisMessageCache) -> Iterator[MessageService]:
    """A SQLite store behind the cache, with every part of the cached backend wired."""
    layout = BucketLayout()
    backend = STORES[request.param]("sqlite://", layout, TagBudget.default(layout.size), Timeouts())
    # The invalidation log is read once an hour: only the send's own round trips are counted.
    served = backends.cached(backend, cache, staleness_seconds=3600)
    yield MessageService(
        served.store,
        served.seqs,
        views=served.views,
        read_marks=served.read_marks,
        fresh_sends=served.fresh_sends,
        clock=lambda: NOW_MS,
    )
    backend.store.close()
    backend.seqs.close()


def test_a_pull_latest_right_after_a_fresh_send_shows_it(wired: MessageService) -> None:
    wired.send(CONV, [draft(1)])
    assert [e.seq for e in wired.pull_latest(CONV, "bob")] == [1]
    assert [e.seq for e in wired.pull_latest(CONV, "bob")] == [1]  # max_seq 1 cached
    assert [m.seq for m in wired.send(CONV, [draft(2)])] == [2]
    entries = wired.pull_latest(CONV, "bob")
    assert [e.seq for e in entries] == [1, 2]
    assert isinstance(entries[1], MessageView) and entries[1].content == "draft 2"


def test_a_fresh_send_is_the_step_then_two_invalidations(
    wired: MessageService, cache: RedisMessageCache
) -> None:
    assert isinstance(wired.fresh_sends, StoringFreshSends)
    wired.send(CONV, [draft(1)])
    commands(cache).clear()
    with watch(RoundTrips()) as trips:
        assert [m.seq for m in wired.send(CONV, [draft(2)])] == [2]
    # The step and the insert (one transaction); the new seq's invalidation, then the
    # watermarks' after the commit.
    assert trips.snapshot().without("redis").drivers == {"sql": 2}
    assert commands(cache) == ["EVALSHA", "EVALSHA"]


def test_a_fused_mark_read_shows_on_the_next_cached_pull(wired: MessageService) -> None:
    wired.send(CONV, [draft(1), draft(2)])
    wired.pull_latest(CONV, "bob")
    with watch(RoundTrips()) as trips:
        assert wired.mark_read(CONV, [2], "bob") == 1
    # The tag write's read, which raises the read seq, and its write.
    assert trips.snapshot().without("redis").drivers == {"sql": 2}
    assert wired.seqs.read_seq(CONV, "bob") == 2
    entries = wired.pull_latest(CONV, "bob")
    assert [getattr(e, "is_read", None) for e in entries] == [False, True]
    assert wired.pull_latest(CONV, "bob") == entries  # filled again
