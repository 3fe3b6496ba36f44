"""Where the MongoDB tests run: URL from env or a mongo:7 container, one database per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from urllib.parse import urlsplit, urlunsplit

from tests.servers import server_url


def start_mongo(containers: ExitStack) -> str:
    """Start mongo:7 with testcontainers; its URL (root user, no database)."""
    try:
        from testcontainers.community.mongodb import MongoDbContainer
    except ImportError:  # older testcontainers
        from testcontainers.mongodb import MongoDbContainer

    container = containers.enter_context(MongoDbContainer("mongo:7"))
    url: str = container.get_connection_url()
    return url


def with_database(url: str, name: str) -> str:
    """url pointing at database name; credentials keep authenticating against admin."""
    parts = urlsplit(url)
    query = parts.query
    if parts.username and "authsource=" not in query.lower():
        query = "&".join(filter(None, [query, "authSource=admin"]))
    return urlunsplit(parts._replace(path=f"/{name}", query=query))


@contextmanager
def mongo_database() -> Iterator[str]:
    """URL of a fresh, uniquely named database, dropped afterwards (or pytest.skip)."""
    from pymongo import MongoClient

    base = server_url("mongo", start_mongo)
    name = f"imbucket_test_{uuid.uuid4().hex[:16]}"
    url = with_database(base, name)
    try:
        yield url
    finally:
        client: MongoClient[dict[str, object]] = MongoClient(url)
        try:
            client.drop_database(name)
        finally:
            client.close()
