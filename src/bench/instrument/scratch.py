"""Throw-away namespaces on shared servers, and engine versions, for the benchmark.

A benchmark run must start from an empty store and leave shared servers as it found them:
each backend gets its own PostgreSQL schema, MariaDB database, MongoDB database or Redis key
prefix, dropped afterwards. Drivers are imported only for the engine a URL names.
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from imbucket.domain.errors import StoreUnavailable

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].split("+", 1)[0].lower()


@contextmanager
def scratch_store(url: str, name: str) -> Iterator[str]:
    """Yield a URL like url whose engine namespace ``name`` is new and empty; drop it after.

    PostgreSQL gets a schema (set as search_path), MariaDB/MySQL a database, MongoDB a
    database. Other URLs (SQLite files, memory) are yielded unchanged.
    """
    if not _NAME.match(name):
        raise ValueError(f"namespace {name!r} must be a lowercase identifier")
    scheme = _scheme(url)
    if scheme in {"postgresql", "postgres", "mysql", "mariadb"}:
        with _sql_scratch(url, name, scheme.startswith("postgres")) as scratch:
            yield scratch
    elif scheme.startswith("mongodb"):
        with _mongo_scratch(url, name) as scratch:
            yield scratch
    else:
        yield url


@contextmanager
def _sql_scratch(url: str, name: str, postgres: bool) -> Iterator[str]:
    from sqlalchemy import create_engine, make_url, text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    base = make_url(url)
    # No pool: the cleanup connects afresh, so a server restarted meanwhile (a cold run of
    # the memory budget) is reached again rather than through a connection it closed.
    admin = create_engine(
        _first_host(base, postgres), isolation_level="AUTOCOMMIT", poolclass=NullPool
    )
    kind = "SCHEMA" if postgres else "DATABASE"
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE {kind} {name}"))
    except SQLAlchemyError as error:
        admin.dispose()
        raise StoreUnavailable(f"cannot create {kind.lower()} {name}: {error}") from None
    if postgres:
        scratch = base.update_query_dict({"options": f"-csearch_path={name}"})
    else:
        scratch = base.set(database=name)
    try:
        yield scratch.render_as_string(hide_password=False)
    finally:
        with _best_effort(), admin.connect() as conn:
            drop = f"DROP {kind} IF EXISTS {name}" + (" CASCADE" if postgres else "")
            conn.execute(text(drop))
        admin.dispose()


def _first_host(url: Any, postgres: bool) -> Any:
    """url; for a MariaDB URL naming several nodes (``?host=a:3306&host=b``), its first node.

    The namespace is created there, and Galera replicates it to the others.
    """
    hosts = url.query.get("host")
    if postgres or not hosts:
        return url
    host, _, port = (hosts if isinstance(hosts, str) else hosts[0]).partition(":")
    return url.difference_update_query(["host"]).set(host=host, port=int(port or 3306))


@contextmanager
def _mongo_scratch(url: str, name: str) -> Iterator[str]:
    from pymongo import MongoClient

    parts = urlsplit(url)
    scratch = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        yield scratch
    finally:
        client: MongoClient[Any] = MongoClient(url, serverSelectionTimeoutMS=5_000)
        with _best_effort():
            client.drop_database(name)
        client.close()


@contextmanager
def scratch_redis(url: str, prefix: str, cluster: bool = False) -> Iterator[str]:
    """Yield prefix; afterwards delete every key of url's database that starts with it.

    With cluster, url names any node of a Redis Cluster and every master is scanned.
    """
    try:
        yield prefix
    finally:
        from redis import Redis
        from redis.cluster import RedisCluster

        client: Redis | RedisCluster = (
            RedisCluster.from_url(url) if cluster else Redis.from_url(url)
        )
        with _best_effort():
            batch = []
            for key in client.scan_iter(match=f"{prefix}*", count=1_000):
                batch.append(key)
                if len(batch) >= 1_000:
                    client.unlink(*batch)
                    batch.clear()
            if batch:
                client.unlink(*batch)
        client.close()


@contextmanager
def _best_effort() -> Iterator[None]:
    """Cleanup that cannot reach its server gives up: the run's own error says why."""
    try:
        yield
    except Exception as error:  # any driver error: the namespace is unreachable, or gone
        warnings.warn(f"could not clean up a scratch namespace: {error}", stacklevel=3)


EMULATORS = ("mongoeco",)  # engines that speak a server's protocol without being that server


def is_emulated(version: str) -> bool:
    """Whether a server_version names an emulator (its latencies say nothing of the server)."""
    return version.split(" ", 1)[0] in EMULATORS


def server_version(url: str) -> str:
    """Name and version of the server a store URL points at ('' if it cannot be asked)."""
    scheme = _scheme(url)
    try:
        if scheme == "sqlite":
            return f"SQLite {sqlite3.sqlite_version}"
        if scheme.startswith("mongodb"):
            return _mongo_version(url)
        if scheme == "redis" or scheme == "rediss":
            return _redis_version(url)
        return _sql_version(url)
    except Exception as error:  # a version is decoration: never fail a run for it
        return f"unknown ({type(error).__name__})"


def _sql_version(url: str) -> str:
    from sqlalchemy import create_engine, make_url, text

    engine = create_engine(_first_host(make_url(url), _scheme(url).startswith("postgres")))
    try:
        with engine.connect() as conn:
            version = str(conn.execute(text("SELECT version()")).scalar())
    finally:
        engine.dispose()
    if "mariadb" in version.lower():
        return "MariaDB " + version.split("-", 1)[0]
    if version.startswith("PostgreSQL"):
        return " ".join(version.split()[:2])
    return f"MySQL {version}" if version[:1].isdigit() else version


def _mongo_version(url: str) -> str:
    from pymongo import MongoClient

    from imbucket.adapters.mongo.replies import server_version as named_in

    client: MongoClient[Any] = MongoClient(url, serverSelectionTimeoutMS=5_000)
    try:
        # The buildInfo command, not server_info(): see MongoConnection._build_info.
        return named_in(client.admin.command("buildInfo"))
    finally:
        client.close()


def _redis_version(url: str) -> str:
    from redis import Redis

    client = Redis.from_url(url)
    try:
        return "Redis " + str(client.info("server")["redis_version"])
    finally:
        client.close()
