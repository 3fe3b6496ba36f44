"""The backend table: every contract test runs once per row, unchanged.

A row names a fixture that returns the config mapping for ``open_service``; server rows
resolve their URL lazily (env, then testcontainers, then skip with a reason). Later backends
add a row here and a config fixture, never a change to the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app import MessageService, open_service
from ports.message_store import MessageStore
from tests.redis_server import redis_prefix, redis_url

Config = dict[str, Any]

BACKENDS = [
    pytest.param("memory_config", id="memory"),
    pytest.param("mongo_bucket_config", id="mongo-bucket"),
    pytest.param("mongo_row_config", id="mongo-row"),
    pytest.param("memory_redis_config", id="memory+redis"),
]


@pytest.fixture
def memory_config() -> Config:
    return {"store": {"backend": "memory"}, "cache": {"backend": "none"}}


@pytest.fixture
def redis_cache() -> Iterator[Config]:
    """Cache config on the test Redis, under a key prefix of its own (removed afterwards)."""
    url = redis_url()
    with redis_prefix(url) as prefix:
        yield {"backend": "redis", "url": url, "key_prefix": prefix}


@pytest.fixture
def memory_redis_config(memory_config: Config, redis_cache: Config) -> Config:
    return {**memory_config, "cache": redis_cache}


@pytest.fixture
def mongo_bucket_config(mongo_url: str) -> Config:
    return {"store": {"backend": "mongo-bucket", "url": mongo_url}, "cache": {"backend": "none"}}


@pytest.fixture
def mongo_row_config(mongo_url: str) -> Config:
    return {"store": {"backend": "mongo-row", "url": mongo_url}, "cache": {"backend": "none"}}


@pytest.fixture(params=BACKENDS)
def backend_config(request: pytest.FixtureRequest) -> Config:
    """The config of one backend row."""
    config: Config = request.getfixturevalue(request.param)
    return config


@pytest.fixture
def open_backend(backend_config: Config) -> Iterator[Any]:
    """Open more services on the same backend (e.g. one per thread or a re-open)."""
    opened: list[MessageService] = []

    def opener(**overrides: Any) -> MessageService:
        config = {**backend_config, **overrides}
        service = open_service(config)
        opened.append(service)
        return service

    yield opener
    for service in opened:
        service.close()


@pytest.fixture
def service(open_backend: Any) -> MessageService:
    """A MessageService on a clean backend."""
    svc: MessageService = open_backend()
    return svc


@pytest.fixture
def store(service: MessageService) -> MessageStore:
    """The MessageStore behind the service."""
    return service.store
