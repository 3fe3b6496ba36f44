"""Where the MongoDB tests run, one database per test.

The server is, in order: IMBUCKET_TEST_MONGO_URL, a mongo:7 container when a Docker engine
answers, else a mongoeco wire server started for the session (tests/mongo_emulator.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from urllib.parse import urlsplit, urlunsplit

from tests import mongo_emulator
from tests.servers import NoServer, origins, server_url


def start_mongo(containers: ExitStack) -> str:
    """Start mongo:7 with testcontainers; its URL (root user, no database)."""
    try:
        from testcontainers.community.mongodb import MongoDbContainer
    except ImportError:  # older testcontainers
        from testcontainers.mongodb import MongoDbContainer

    container = containers.enter_context(MongoDbContainer("mongo:7"))
    url: str = container.get_connection_url()
    return url


described: dict[str, str] = {}  # what the session's server says it is, asked once


def start_emulator(stack: ExitStack) -> str:
    """Start the mongoeco server until the session ends; its URL."""
    try:
        emulator = stack.enter_context(mongo_emulator.running_emulator())
    except mongo_emulator.NoPython as error:
        raise NoServer(str(error)) from None
    origins["mongo"] = emulator.description
    return emulator.url


def mongo_server() -> str:
    """URL of the test MongoDB (env, container, mongoeco), or pytest.skip with the reason."""
    return server_url("mongo", start_mongo, start_emulator)


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

    base = mongo_server()
    if "mongo" not in described:
        described["mongo"] = server_name(base)
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


def emulated_mongo() -> bool:
    """Whether the session's MongoDB is the mongoeco emulator (asked by a Mongo test)."""
    return described.get("mongo", "").startswith("mongoeco")


def server_name(url: str) -> str:
    """What the server says it is, as ``imbucket backends`` prints it."""
    from imbucket.adapters.mongo.connection import MongoConnection

    connection = MongoConnection(url)
    try:
        return connection.server_version()
    finally:
        connection.close()


def where_mongo_ran() -> str:
    """The session's MongoDB server and where it came from (after a Mongo test asked for it)."""
    return f"{described.get('mongo', '?')} from {origins.get('mongo', '?')}"


def summary(outcomes: dict[str, int], servers: set[str]) -> str:
    """The end-of-session line: which servers the MongoDB tests ran on, and their outcomes.

    Under pytest-xdist each worker starts a server of its own, so there may be several.
    """
    counts = ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items() if count)
    if not servers:
        return f"MongoDB tests found no server: {counts}"
    return f"MongoDB tests ran on {'; '.join(sorted(servers))}: {counts}"
