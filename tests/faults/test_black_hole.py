"""A server that keeps its connections open but stops answering: every call still returns.

Each store reaches its server through a TcpProxy of the test's own; ``black_hole()`` keeps
every connection open and swallows everything, new connections included, as a hung server
or a silent network would. A call must then end with StoreUnavailable (naming the use case)
within its configured bounds, leave the stored data as it was, and work again once the
server answers. Each call runs in a thread joined with a generous hard cap: a call still
blocked at the cap is the failure (no elapsed time is asserted).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from imbucket.app import MessageService, open_service
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.model import Draft
from imbucket.domain.projection import MessageView
from imbucket.testing.aio import BlockingService, LoopThread
from imbucket.testing.rows import store_config
from tests.faults.conftest import _ENGINES, STORES
from tests.proxy import TcpProxy
from tests.redis_server import redis_prefix, redis_url
from tests.waits import returned

CONV = "si_alice_bob"
SHORT = {"connect_timeout_seconds": 1, "statement_timeout_seconds": 1, "pool_timeout_seconds": 1}


def draft(n: int) -> Draft:
    return Draft(
        send_id="alice", content=f"hello {n}", client_msg_id=f"c-{n}", session_type=1, recv_id="bob"
    )


# Each SQL store on both APIs: imbucket.aio's drivers are bounded by the same settings.
ON_BOTH_APIS = [
    *[pytest.param((*store.values[0], False), id=store.id) for store in STORES],
    *[pytest.param((*store.values[0], True), id=f"aio:{store.id}") for store in STORES],
]


def served(
    config: dict[str, Any], proxy: TcpProxy, aio: bool = False
) -> Iterator[tuple[MessageService, TcpProxy]]:
    """The service of config (whose URL points at proxy); both closed afterwards.

    aio: the service is imbucket.aio's, driven through imbucket.testing.aio's blocking facade.
    """
    loop = LoopThread() if aio else None
    service: Any = BlockingService.open(config, loop) if loop else open_service(config)
    try:
        yield service, proxy
    finally:
        proxy.close()
        service.close()
        if loop is not None:
            loop.close()


def opened(
    request: pytest.FixtureRequest, settings: dict[str, Any]
) -> Iterator[tuple[MessageService, TcpProxy]]:
    backend, engine, *aio = request.param
    find_server, namespace, port = _ENGINES[engine]
    with namespace(find_server()) as url:
        proxy = TcpProxy(url, port)
        config = store_config(backend, proxy.url)
        config["store"].update(settings)
        yield from served(config, proxy, bool(aio and aio[0]))


@pytest.fixture(params=ON_BOTH_APIS)
def short(request: pytest.FixtureRequest) -> Iterator[tuple[MessageService, TcpProxy]]:
    """A store whose every wait is bounded to 1 s, behind a proxy."""
    yield from opened(request, SHORT)


@pytest.fixture(params=[ON_BOTH_APIS[0], ON_BOTH_APIS[1], ON_BOTH_APIS[4], ON_BOTH_APIS[5]])
def default(request: pytest.FixtureRequest) -> Iterator[tuple[MessageService, TcpProxy]]:
    """A store with the default settings and a plain URL, behind a proxy."""
    yield from opened(request, {})


def contents(service: MessageService) -> list[str]:
    return [
        e.message.content for e in service.pull_latest(CONV, "bob") if isinstance(e, MessageView)
    ]


def check_a_silent_read(service: MessageService, proxy: TcpProxy, named: str) -> None:
    """A pull from a black-holed server gives StoreUnavailable named ``named``; then it works."""
    service.send(CONV, [draft(1)])
    proxy.black_hole()
    error = returned(lambda: service.pull_latest(CONV, "bob"))
    assert isinstance(error, StoreUnavailable)
    assert str(error).startswith(named)
    proxy.restore()
    assert returned(lambda: contents(service)) == ["hello 1"]


def test_a_read_from_a_silent_server_gives_store_unavailable_and_works_again(
    short: tuple[MessageService, TcpProxy],
) -> None:
    check_a_silent_read(*short, "pull_latest: ")


def test_a_send_cut_by_a_silent_server_is_stored_once_when_retried(
    short: tuple[MessageService, TcpProxy],
) -> None:
    service, proxy = short
    service.send(CONV, [draft(1)])
    proxy.black_hole()
    error = returned(lambda: service.send(CONV, [draft(2)]))
    assert isinstance(error, StoreUnavailable)  # OutcomeUnknown too, if allocate was cut
    assert str(error).startswith("send: ")
    proxy.restore()
    sent = returned(lambda: service.send(CONV, [draft(2)]))
    assert not isinstance(sent, BaseException)
    assert returned(lambda: service.send(CONV, [draft(2)])) == sent  # still idempotent
    assert returned(lambda: contents(service)) == ["hello 1", "hello 2"]


def test_with_default_settings_a_silent_server_still_answers(
    default: tuple[MessageService, TcpProxy],
) -> None:
    check_a_silent_read(*default, "pull_latest: ")


@pytest.fixture
def mongo(mongo_url: str) -> Iterator[tuple[MessageService, TcpProxy]]:
    """mongo-bucket on the test's MongoDB (skips without one), behind a proxy, waits of 1 s."""
    proxy = TcpProxy(mongo_url, 27017)
    # One server, addressed through the proxy: never discover members behind its back. The
    # URL's own options go (an emulator's patient timeouts would win over SHORT).
    parts = urlsplit(proxy.url)
    bare = parts._replace(path=parts.path or "/", query="").geturl()
    config = store_config("mongo-bucket", f"{bare}?directConnection=true")
    config["store"].update(SHORT)
    yield from served(config, proxy)


def test_mongo_a_silent_server_gives_store_unavailable_and_works_again(
    mongo: tuple[MessageService, TcpProxy],
) -> None:
    check_a_silent_read(*mongo, "pull_latest: MongoDB")


@pytest.fixture
def cached() -> Iterator[tuple[MessageService, TcpProxy]]:
    """A memory store behind the Redis cache, Redis behind a proxy, cache waits of 0.2 s."""
    url = redis_url()
    with redis_prefix(url) as prefix:
        proxy = TcpProxy(url, 6379)
        cache = {"backend": "redis", "url": proxy.url, "key_prefix": prefix}
        cache.update(connect_timeout_seconds=0.2, socket_timeout_seconds=0.2)
        yield from served({"store": {"backend": "memory"}, "cache": cache}, proxy)


def test_a_silent_redis_is_skipped_and_answers_stay_right(
    cached: tuple[MessageService, TcpProxy],
) -> None:
    service, proxy = cached
    service.send(CONV, [draft(1)])
    assert contents(service) == ["hello 1"]  # now cached
    proxy.black_hole()
    assert returned(lambda: service.send(CONV, [draft(2)])) != []
    assert returned(lambda: contents(service)) == ["hello 1", "hello 2"]
    proxy.restore()
    assert returned(lambda: contents(service)) == ["hello 1", "hello 2"]
