"""PostgreSQL and MariaDB for tests: where the server is, and a fresh namespace per test.

Other test runs share the same servers, so every test gets its own PostgreSQL schema or
MariaDB database (a uuid name), created and dropped by ``imbucket.bench.instrument.scratch`` as the
benchmark's are. Nothing shared is ever dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from imbucket.bench.instrument.scratch import scratch_store
from tests.servers import server_url


def postgres_server() -> str:
    """URL of the PostgreSQL test server (env, else a container, else skip)."""
    return server_url("postgres", _start_postgres)


def mariadb_server() -> str:
    """URL of the MariaDB test server (env, else a container, else skip)."""
    return server_url("mariadb", _start_mariadb)


@contextmanager
def postgres_schema(server: str) -> Iterator[str]:
    """A new schema on server; yields a URL whose search_path points at it."""
    with scratch_store(server, _unique_name()) as url:
        yield url


@contextmanager
def mariadb_database(server: str) -> Iterator[str]:
    """A new database on server; yields a URL naming it."""
    with scratch_store(server, _unique_name()) as url:
        yield url


def _unique_name() -> str:
    return f"imb_test_{uuid.uuid4().hex[:16]}"


def _start_postgres(stack: ExitStack) -> str:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before the "community" split
        from testcontainers.postgres import PostgresContainer

    container = stack.enter_context(PostgresContainer("postgres:16-alpine", driver="psycopg"))
    return str(container.get_connection_url())


def _start_mariadb(stack: ExitStack) -> str:
    try:
        from testcontainers.community.mysql import MySqlContainer
    except ImportError:  # testcontainers before the "community" split
        from testcontainers.mysql import MySqlContainer

    # root, so that the tests may create and drop their own databases
    container = MySqlContainer("mariadb:11", dialect="pymysql", username="root", password="test")
    return str(stack.enter_context(container).get_connection_url())
