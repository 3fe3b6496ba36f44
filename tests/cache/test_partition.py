"""A writer cut off from the cache: what it changes reaches every cached reader within the bound.

Two services on one SQLite store: the reader with the right cache, the writer whose cache is
unreachable, by a mistyped port or by a connection cut after it opened. The writer's revoke,
delete-for-me and purge cannot invalidate Redis; they go through the store's invalidation
log, which the reader replays before it serves from the cache again.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imbucket import (
    Actor,
    Draft,
    Health,
    MessageService,
    MessageView,
    Role,
    Tombstone,
    open_service,
)
from imbucket.adapters.cached_store import CachedMessageStore
from imbucket.bench.instrument.roundtrips import RoundTrips, watch
from tests.private_servers import free_ports
from tests.proxy import TcpProxy

CONV = "sg_team"
OWNER = Actor("alice", Role.OWNER)
STALENESS = 0.3
Config = dict[str, Any]


def views_of(service: MessageService, viewer: str) -> list[str]:
    """What viewer sees of seqs 1-3: text, "revoked" or the tombstone's reason."""
    shown = []
    for entry in service.pull_range(CONV, viewer, 1, 3):
        if isinstance(entry, Tombstone):
            shown.append(entry.reason.value)
        else:
            assert isinstance(entry, MessageView)
            shown.append("revoked" if entry.revoked else entry.content)
    return shown


@pytest.fixture
def store(tmp_path: Path) -> Config:
    return {"backend": "sql-bucket", "url": f"sqlite:///{tmp_path / 'chat.db'}"}


@pytest.fixture
def reader(store: Config, redis_cache: Config) -> Iterator[MessageService]:
    """The reader, with three messages cached in bob's and carol's views."""
    cache = {**redis_cache, "staleness_seconds": STALENESS}
    with open_service({"store": store, "cache": cache}) as service:
        drafts = [
            Draft(send_id="alice", content=f"m{n}", client_msg_id=f"c-{n}", group_id="team")
            for n in (1, 2, 3)
        ]
        service.send(CONV, drafts)
        for viewer in ("bob", "carol"):
            views_of(service, viewer)
            assert views_of(service, viewer) == ["m1", "m2", "m3"]
        yield service


def write_cut_off(writer: MessageService) -> None:
    writer.revoke(CONV, 1, Actor("alice"))
    writer.delete_for_me(CONV, [2], "bob")
    writer.purge(CONV, [3], OWNER)


def assert_seen_after_the_bound(reader: MessageService) -> None:
    time.sleep(STALENESS)
    assert views_of(reader, "bob") == ["revoked", "deleted", "purged"]
    assert views_of(reader, "carol") == ["revoked", "m2", "purged"]


def test_a_writer_with_a_mistyped_cache_port(
    reader: MessageService, store: Config, redis_cache: Config
) -> None:
    mistyped = {**redis_cache, "url": f"redis://127.0.0.1:{free_ports(1)[0]}/0"}
    with open_service({"store": store, "cache": mistyped}) as writer:
        assert writer.health().cache is not None
        assert not writer.health().cache.reachable
        write_cut_off(writer)
    assert_seen_after_the_bound(reader)


def test_a_writer_whose_redis_connection_is_cut_after_it_opened(
    reader: MessageService, store: Config, redis_cache: Config
) -> None:
    proxy = TcpProxy(redis_cache["url"])
    try:
        with open_service({"store": store, "cache": {**redis_cache, "url": proxy.url}}) as writer:
            views_of(writer, "bob")  # the writer reached Redis once
            assert writer.health().ready
            proxy.cut()
            write_cut_off(writer)
            assert not writer.health().ready
    finally:
        proxy.close()
    assert_seen_after_the_bound(reader)


def test_a_writer_on_the_same_cache_is_seen_at_once(
    reader: MessageService, store: Config, redis_cache: Config
) -> None:
    with open_service({"store": store, "cache": redis_cache}) as writer:
        write_cut_off(writer)
    assert views_of(reader, "bob") == ["revoked", "deleted", "purged"]


def test_a_cached_service_settles_a_refused_revoke_on_the_store_itself(
    reader: MessageService,
) -> None:
    assert isinstance(reader.store, CachedMessageStore)
    assert reader.authority is reader.store.store


def test_a_fully_cached_pull_stays_one_redis_round_trip_and_the_log_one_read_per_interval(
    store: Config, redis_cache: Config
) -> None:
    config = {"store": store, "cache": {**redis_cache, "staleness_seconds": 60}}
    with open_service(config) as warm:
        warm.send(CONV, [Draft(send_id="alice", content="hi", client_msg_id="c-1", group_id="t")])
        views_of(warm, "bob")
        views_of(warm, "bob")
        with watch(RoundTrips()) as steady:
            for _ in range(20):
                views_of(warm, "bob")
        assert steady.snapshot().drivers == {"redis": 20}
        with open_service(config) as opened, watch(RoundTrips()) as first:
            assert views_of(opened, "bob") == views_of(warm, "bob")
    # The opened service's first pull read the log once (warm's pull above, none).
    assert first.snapshot().drivers == {"sql": 1, "redis": 2}


def backends_command(settings: Path) -> subprocess.CompletedProcess[str]:
    """``imbucket backends --config settings``, run as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "imbucket", "backends", "--config", str(settings)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_backends_and_health_report_an_unreachable_cache(
    store: Config, redis_cache: Config, tmp_path: Path
) -> None:
    open_service({"store": store, "cache": redis_cache}).close()  # bound to its cache
    mistyped = {**redis_cache, "url": f"redis://127.0.0.1:{free_ports(1)[0]}/0"}
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"store": store, "cache": mistyped}))
    done = backends_command(settings)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reachable: store sql-bucket" in done.stdout
    assert f"unreachable: cache redis at {mistyped['url']}" in " ".join(done.stdout.split())
    settings.write_text(json.dumps({"store": store, "cache": redis_cache}))
    fixed = backends_command(settings)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert f"reachable: cache redis at {redis_cache['url']}" in " ".join(fixed.stdout.split())


def test_the_async_health_call_reports_both_parts(store: Config, redis_cache: Config) -> None:
    from imbucket.aio import open_service as open_async

    mistyped = {**redis_cache, "url": f"redis://127.0.0.1:{free_ports(1)[0]}/0"}

    async def both() -> tuple[Health, Health]:
        async with open_async({"store": store, "cache": redis_cache}) as good:
            healthy = await good.health()
        async with open_async({"store": store, "cache": mistyped}) as bad:
            return healthy, await bad.health()

    healthy, cut_off = asyncio.run(both())
    assert healthy.ready and healthy.cache is not None and healthy.cache.reachable
    assert cut_off.store.reachable and not cut_off.ready
    assert cut_off.cache is not None and "check cache.url" in cut_off.cache.detail
