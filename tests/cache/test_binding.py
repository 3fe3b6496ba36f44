"""One cache per store: a service that would bypass the store's cache is refused at open.

The store records which cache fronts it (none, or a token the cache holds too); a service
opening it without that cache, with another Redis or another key prefix is refused with
CacheMismatch, and ``imbucket.app.cache_binding.attach`` / ``detach`` are the steps that change it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.app import MessageService, open_service
from imbucket.app.cache_binding import attach, detach
from imbucket.domain.errors import CacheMismatch, ConfigError
from imbucket.domain.model import Actor
from tests.cache.cases import CONV, chat
from tests.cache.conftest import CacheFactory, Clock, Target, commands
from tests.redis_server import redis_prefix, redis_url

Config = dict[str, Any]


def store(path: Path) -> Config:
    return {"backend": "sql-row", "url": f"sqlite:///{path / 'chat.db'}"}


@pytest.fixture
def cached(target: Target, prefix: str, tmp_path: Path) -> Config:
    """A SQLite file store behind this test's cache."""
    backend = "redis-cluster" if target.cluster else "redis"
    return {
        "store": store(tmp_path),
        "cache": {"backend": backend, "url": target.url, "key_prefix": prefix},
    }


@pytest.fixture
def other_url() -> Iterator[str]:
    """A prefix on another Redis database than every target's: another cache.url."""
    url = redis_url().rsplit("/", 1)[0] + "/1"
    with redis_prefix(url):
        yield url


def texts(service: MessageService) -> list[str]:
    return [
        entry.message.content if entry.message else ""
        for entry in service.pull_latest(CONV, "bob", 5)
    ]


def seeded(config: Config) -> MessageService:
    """A service on config whose pull of CONV is cached (its text: "message 1" …)."""
    service = open_service(config)
    service.ingest(CONV, chat(1, 3))
    service.pull_latest(CONV, "bob", 5)
    return service


def test_a_writer_without_the_cache_is_refused_and_cannot_leave_a_revoke_unseen(
    cached: Config,
) -> None:
    with seeded(cached) as a:
        before = texts(a)
        with pytest.raises(CacheMismatch, match=re.escape('cache.backend = "none"')) as refused:
            open_service({"store": cached["store"]})
        assert "imbucket cache detach" in str(refused.value)
        assert texts(a) == before  # nothing was written
        a.revoke(CONV, 3, Actor("alice"))  # a writer through the cache is seen at once
        assert texts(a)[-1] != before[-1]


def test_a_store_created_without_cache_refuses_a_cached_service(cached: Config) -> None:
    open_service({"store": cached["store"]}).close()
    with pytest.raises(CacheMismatch, match="imbucket cache attach"):
        open_service(cached)


def test_another_key_prefix_is_refused(cached: Config) -> None:
    seeded(cached).close()
    with redis_prefix(cached["cache"]["url"], cached["cache"]["backend"] != "redis") as other:
        moved = {**cached, "cache": {**cached["cache"], "key_prefix": other}}
        with pytest.raises(CacheMismatch, match=re.escape("cache.key_prefix")):
            open_service(moved)


def test_another_redis_is_refused(cached: Config, other_url: str) -> None:
    seeded(cached).close()
    elsewhere = {"backend": "redis", "url": other_url, "key_prefix": cached["cache"]["key_prefix"]}
    with pytest.raises(CacheMismatch, match=re.escape("cache.url")):
        open_service({**cached, "cache": elsewhere})


def test_the_same_cache_reopens_and_a_full_cached_pull_stays_one_round_trip(
    cached: Config,
) -> None:
    seeded(cached).close()
    with open_service(cached) as service:
        first = texts(service)  # fills this service's view
        sent: list[str] = []
        client = service.store.cache.cache.client  # type: ignore[attr-defined]
        send = client.execute_command

        def counted(*args: Any, **options: Any) -> Any:
            sent.append(str(args[0]).upper())
            return send(*args, **options)

        client.execute_command = counted
        assert texts(service) == first
        assert sent == ["EVALSHA"]


def test_detach_then_uncached_writers_are_served_and_cached_services_refused(
    cached: Config,
) -> None:
    seeded(cached).close()
    detach(cached)
    with open_service({"store": cached["store"]}) as b:
        b.revoke(CONV, 3, Actor("alice"))
        assert "message" not in texts(b)[-1]
    with pytest.raises(CacheMismatch):
        open_service(cached)


def test_attach_adds_a_cache_and_empties_it_first(cached: Config, target: Target) -> None:
    with open_service({"store": cached["store"]}) as b:
        b.ingest(CONV, chat(1, 3))
    stale = RedisMessageCache.from_url(
        target.url, cluster=target.cluster, key_prefix=cached["cache"]["key_prefix"]
    )
    stale.client.set(stale.slot_key(CONV, 3), b"left over")
    attach(cached)
    assert stale.client.get(stale.slot_key(CONV, 3)) is None
    stale.close()
    with open_service(cached) as a:
        assert len(texts(a)) == 3
    with pytest.raises(CacheMismatch):
        open_service({"store": cached["store"]})


def test_attach_moves_the_cache_to_another_prefix(cached: Config, target: Target) -> None:
    seeded(cached).close()
    with redis_prefix(target.url, target.cluster) as other:
        moved = {**cached, "cache": {**cached["cache"], "key_prefix": other}}
        attach(moved)
        with open_service(moved) as a:
            a.revoke(CONV, 3, Actor("alice"))
            assert "message" not in texts(a)[-1]
        with pytest.raises(CacheMismatch):
            open_service(cached)  # the old cache is refused from now on


def test_attach_needs_a_cache(cached: Config) -> None:
    seeded(cached).close()
    with pytest.raises(ConfigError, match="cache attach needs"):
        attach({"store": cached["store"]})


def test_a_cache_unconfirmed_at_open_serves_nothing_until_it_holds_the_binding(
    make_cache: CacheFactory, clock: Clock
) -> None:
    cache = make_cache()
    cache.client.set(cache.binding_key, "theirs")
    cache.expect("ours")
    assert cache.get_many(CONV, [1]).ticket is None
    cache.client.set(cache.binding_key, "ours")
    clock.advance(60)
    assert cache.get_many(CONV, [1]).ticket is None  # another store's cache: never used
    cache.expect("ours")
    commands(cache).clear()
    assert cache.get_many(CONV, [1]).ticket is not None
    assert commands(cache)[0] == "GET"


def test_the_cli_attaches_and_refuses_in_one_line(cached: Config, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from imbucket.app.cli import cli

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(cached))
    seeded({"store": cached["store"]}).close()
    done = CliRunner().invoke(cli, ["cache", "attach", "--config", str(settings)])
    assert (done.exit_code, done.output.strip()) == (0, "cache attach: done")
    uncached = tmp_path / "uncached.json"
    uncached.write_text(json.dumps({"store": cached["store"]}))
    refused = CliRunner().invoke(cli, ["cache", "attach", "--config", str(uncached)])
    assert refused.exit_code == 2
    assert "cache attach needs" in refused.output
