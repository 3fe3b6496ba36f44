"""Redis unreachable or slow: every answer stays right, and one warning per outage.

The shared Redis is never stopped: a cache points at a closed local port, or talks to Redis
through a proxy the test cuts, stalls and restores. A twin service without any cache runs
the same operations; both must answer every pull identically.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository
from imbucket.adapters.redis_cache import MarksOf, RedisMessageCache
from imbucket.adapters.redis_client import client_options
from imbucket.app import MessageService
from imbucket.domain.model import Actor
from tests.cache.cases import CONV, MUTATIONS, chat, seed
from tests.cache.conftest import (
    CacheFactory,
    Clock,
    CountingRedis,
    SpyStore,
    Target,
    cached_service,
    commands,
    plain_service,
    viewed_service,
)
from tests.proxy import TcpProxy

VIEWERS = ("alice", "bob", "carol")


class Twins:
    """A cached service and an uncached one, driven together."""

    def __init__(self, cached: MessageService) -> None:
        self.cached = cached
        self.plain = plain_service(BucketMessageStore(MemoryBucketRepository()))

    def do(self, operation: Callable[[MessageService], object]) -> None:
        assert operation(self.cached) == operation(self.plain)

    def agree(self) -> None:
        """Every viewer sees the same on both services."""
        for viewer in VIEWERS:
            assert self.cached.pull_latest(CONV, viewer) == self.plain.pull_latest(CONV, viewer)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "imbucket.adapters.redis_cache" and r.levelno == logging.WARNING
    ]


def closed_port_url() -> str:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.fixture
def target(url: str) -> Target:
    """Outages are staged through a proxy to the single Redis (failover: test_failover.py)."""
    return Target(url, cluster=False)


@dataclass(frozen=True)
class Outage:
    """Caches that reach Redis through a proxy the test controls, over the spied store."""

    proxy: TcpProxy
    spy: SpyStore
    clock: Clock
    make_cache: CacheFactory

    def twins(self, **options: Any) -> tuple[Twins, RedisMessageCache]:
        """A cached service behind the proxy (and its uncached twin), and its cache."""
        cache = self.make_cache(self.proxy.url, **options)
        return Twins(cached_service(self.spy, cache)), cache


@pytest.fixture
def outage(url: str, make_cache: CacheFactory, spy: SpyStore, clock: Clock) -> Iterator[Outage]:
    proxy = TcpProxy(url)
    yield Outage(proxy, spy, clock, make_cache)
    proxy.close()


def test_a_cache_on_a_closed_port_changes_no_answer(
    spy: SpyStore, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    client = CountingRedis.from_url(closed_port_url(), **client_options())
    cache = RedisMessageCache(client, key_prefix="imbucket-test", clock=clock)
    twins = Twins(cached_service(spy, cache))
    twins.do(seed)
    for mutation in MUTATIONS:
        twins.agree()
        twins.do(mutation.apply)
        clock.advance(0.5)  # some calls retry Redis, some skip it
    twins.agree()
    assert len(warnings(caplog)) == 1
    assert cache.pending == {CONV: frozenset(range(1, 7))}  # every write, seed included
    # Tried at t=0, then once per second of the clock (t=1, t=2), never on every call.
    assert len(commands(cache)) == 3


def test_an_outage_is_logged_again_every_interval_until_it_is_fixed(
    spy: SpyStore, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    client = CountingRedis.from_url(closed_port_url(), **client_options())
    cache = RedisMessageCache(client, key_prefix="imbucket-test", clock=clock, warning_interval=60)
    service = cached_service(spy, cache)
    seed(service)
    for _ in range(130):  # 130 s of pulls, one a second
        service.pull_latest(CONV, "bob")
        clock.advance(1.0)
    assert len(warnings(caplog)) == 3  # at the start, after 60 s and after 120 s
    assert "for 120 s" in warnings(caplog)[-1]


def test_redis_cut_mid_test_then_back(
    outage: Outage, raw: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    twins, cache = outage.twins()
    proxy, spy, clock = outage.proxy, outage.spy, outage.clock
    twins.do(seed)
    twins.agree()  # cache warm
    stale = raw.get(cache.slot_key(CONV, 3))
    assert stale is not None

    proxy.cut()
    for mutation in MUTATIONS:
        twins.do(mutation.apply)
        twins.agree()
    assert raw.get(cache.slot_key(CONV, 3)) == stale  # Redis still holds the old slot...
    assert cache.pending == {CONV: frozenset({3, 6})}  # ...and the cache knows it
    assert len(warnings(caplog)) == 1

    proxy.restore()
    twins.agree()  # still within the retry interval: served by the store
    clock.advance(1.0)
    twins.agree()  # Redis again: pending invalidations are delivered before any lookup
    assert cache.pending == {}
    assert raw.get(cache.slot_key(CONV, 3)) != stale
    spy.reads.clear()
    twins.agree()
    assert spy.reads == []  # and the cache serves again

    proxy.cut()  # a second outage, a second warning
    clock.advance(1.0)
    twins.do(lambda s: s.delete_for_me(CONV, [2], "bob"))
    twins.agree()
    assert len(warnings(caplog)) == 2


def test_watermark_changes_during_an_outage_are_delivered_before_the_next_cached_pull(
    outage: Outage, raw: redis.Redis
) -> None:
    cache = outage.make_cache(outage.proxy.url)
    twins = Twins(viewed_service(outage.spy, cache))
    twins.do(seed)
    twins.agree()
    twins.agree()  # watermarks and slots cached
    stale = raw.get(cache.marks_key(CONV))
    assert stale is not None

    outage.proxy.cut()
    twins.do(lambda s: s.clear_history(CONV, "bob"))
    twins.do(lambda s: s.ingest(CONV, chat(7, 7)))
    twins.agree()  # the store answers meanwhile
    assert raw.get(cache.marks_key(CONV)) == stale
    assert cache.pending == {CONV: frozenset({MarksOf("bob"), MarksOf(None), 7})}

    outage.proxy.restore()
    outage.clock.advance(1.0)
    twins.agree()  # delivered before the first lookup, then filled again
    assert cache.pending == {}
    assert raw.get(cache.marks_key(CONV)) not in (None, stale)
    outage.spy.reads.clear()
    twins.agree()
    assert outage.spy.reads == []


def test_a_stalled_redis_times_out_and_the_store_answers(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    twins, cache = outage.twins(timeout=0.05)
    proxy, clock = outage.proxy, outage.clock
    twins.do(seed)
    twins.agree()

    proxy.stall()
    twins.do(lambda s: s.revoke(CONV, 3, Actor("alice")))
    twins.agree()
    assert any("Timeout" in message for message in warnings(caplog))
    assert cache.pending == {CONV: frozenset({3})}

    proxy.restore()
    clock.advance(1.0)
    twins.agree()
    assert cache.pending == {}
    assert len(warnings(caplog)) == 1


def test_too_many_lost_invalidations_make_the_cache_unused_for_one_ttl(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    twins, cache = outage.twins(max_pending=2, ttl_seconds=60)
    service, proxy, spy, clock = twins.cached, outage.proxy, outage.spy, outage.clock
    seed(service)
    service.pull_latest(CONV, "bob")

    proxy.cut()
    service.delete_for_me(CONV, [1, 2, 3], "bob")  # three seqs: more than max_pending
    assert any(r.levelno == logging.ERROR for r in caplog.records)
    proxy.restore()
    clock.advance(59)
    commands(cache).clear()
    spy.reads.clear()
    service.pull_latest(CONV, "bob")
    assert commands(cache) == []  # not trusted within one TTL of losing track
    assert spy.reads == [[1, 2, 3, 4, 5, 6]]

    clock.advance(1)
    service.pull_latest(CONV, "bob")
    assert commands(cache)[:1] == ["MGET"]


def test_a_process_that_only_writes_delivers_what_it_missed_with_its_next_write(
    outage: Outage, raw: redis.Redis
) -> None:
    _, cache = outage.twins()
    raw.set(cache.slot_key(CONV, 3), b"an old slot")
    outage.proxy.cut()
    cache.invalidate(CONV, [3])
    assert cache.pending == {CONV: frozenset({3})}
    outage.proxy.restore()
    outage.clock.advance(1.0)
    cache.invalidate(CONV, [4])
    assert cache.pending == {}
    assert not raw.exists(cache.slot_key(CONV, 3))
