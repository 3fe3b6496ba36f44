"""Cache backends are registry entries, read by settings, the CLI, the container and aio."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from imbucket.aio import open_service as open_async
from imbucket.app import open_service
from imbucket.app.backends import Backend
from imbucket.app.cli import cli
from imbucket.app.registry import CACHES, CacheRules
from imbucket.app.settings import CacheSettings, load_settings
from imbucket.domain.errors import ConfigError

fronted: list[tuple[str, bool, bool]] = []  # (key prefix, cluster, asynchronous) per toy cache


def toy_cache(
    backend: Backend, settings: CacheSettings, rules: CacheRules, *, asynchronous: bool
) -> Backend:
    """A cache factory that fronts nothing: it records what the container passed it."""
    fronted.append((settings.key_prefix, rules.cluster, asynchronous))
    return backend


@pytest.fixture(autouse=True)
def toy_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CACHES, "_caches", dict(CACHES._caches))
    CACHES.register("toy", f"{__name__}:toy_cache", CacheRules(cluster=True))
    CACHES.register("toy-sync", f"{__name__}:toy_cache", CacheRules(asyncio=False))
    fronted.clear()


def test_the_built_in_caches_and_their_rules() -> None:
    rules = {name: CACHES.get(name).rules for name in ("none", "redis", "redis-cluster")}
    assert rules == {
        "none": CacheRules(fronts=False),
        "redis": CacheRules(),
        "redis-cluster": CacheRules(cluster=True),
    }


def test_a_new_cache_backend_is_one_registration() -> None:
    with open_service({"cache": {"backend": "toy", "key_prefix": "p"}}) as service:
        assert service.max_seq("si_a_b") == 0
    assert fronted == [("p", True, False)]
    result = CliRunner().invoke(cli, ["backends"])
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("│")[1:3]] for line in result.output.splitlines()]
    assert ["cache", "toy"] in rows and ["cache", "redis-cluster"] in rows


def test_an_unknown_cache_backend_names_the_registered_ones() -> None:
    known = "none, redis, redis-cluster, toy, toy-sync"
    with pytest.raises(ConfigError, match=f"unknown cache backend 'nope'; known: {known}$"):
        load_settings({"cache": {"backend": "nope"}})


def test_the_async_service_passes_the_driver_mode_to_the_cache_and_refuses_one_without() -> None:
    async def opened(cache: str) -> None:
        async with open_async({"cache": {"backend": cache, "key_prefix": "a"}}) as service:
            await service.max_seq("si_a_b")

    asyncio.run(opened("toy"))
    assert fronted == [("a", True, True)]
    with pytest.raises(ConfigError, match="no asyncio driver for cache backend 'toy-sync'"):
        asyncio.run(opened("toy-sync"))
    assert fronted == [("a", True, True)]  # refused before anything was opened
