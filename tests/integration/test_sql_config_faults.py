"""A wrong store.url on a real server is a ConfigError with the fix, raised on the first try.

Unknown database, unknown role, a wrong password, a missing PostgreSQL schema, a MariaDB URL
naming no database: none of them is an outage, so none is tried again. Attempts are counted
by the engine's connect and statement hooks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, event, make_url

from imbucket.app import open_service
from imbucket.domain.errors import ConfigError
from tests.sql_servers import mariadb_server, postgres_server


@dataclass
class Attempts:
    """Connections opened and CREATE TABLE statements sent while counting."""

    connects: int = 0
    creates: list[str] = field(default_factory=list)


@contextmanager
def counted() -> Iterator[Attempts]:
    attempts = Attempts()

    def connect(*_: Any) -> None:
        attempts.connects += 1

    def execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("CREATE TABLE"):
            attempts.creates.append(statement)

    event.listen(Engine, "do_connect", connect)
    event.listen(Engine, "before_cursor_execute", execute)
    try:
        yield attempts
    finally:
        event.remove(Engine, "do_connect", connect)
        event.remove(Engine, "before_cursor_execute", execute)


def _missing() -> str:
    return f"imb_missing_{uuid.uuid4().hex[:12]}"


def _with(server: Callable[[], str], **parts: Any) -> str:
    return make_url(server()).set(**parts).render_as_string(hide_password=False)


CASES: dict[str, tuple[Callable[[], str], str, int]] = {
    # case -> (the URL, what the message says, connections tried)
    "postgres unknown database": (
        lambda: _with(postgres_server, database=_missing()),
        "does not exist: create that database",
        1,
    ),
    "postgres unknown role": (
        lambda: _with(postgres_server, username=_missing()),
        "check the user and password in store.url",
        1,
    ),
    "mariadb unknown database": (
        lambda: _with(mariadb_server, database=_missing()),
        "Unknown database",
        1,
    ),
    "mariadb access denied": (
        lambda: _with(mariadb_server, username="root", password=_missing()),
        "check the user and password in store.url",
        1,
    ),
    "mariadb unknown user": (
        lambda: _with(mariadb_server, username=_missing()),
        "check the user and password in store.url",
        1,
    ),
    "mariadb without a database": (
        lambda: mariadb_server().rsplit("/", 1)[0],
        "a MariaDB URL needs a database",
        0,
    ),
}


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_wrong_url_is_a_config_error_tried_once(case: str, backend: str) -> None:
    url_of, says, connects = CASES[case]
    url = url_of()
    with counted() as attempts, pytest.raises(ConfigError, match=says):
        open_service({"store": {"backend": backend, "url": url}})
    assert attempts.connects == connects


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_a_missing_postgres_schema_is_a_config_error_tried_once(backend: str) -> None:
    url = make_url(postgres_server()).update_query_dict({"options": f"-csearch_path={_missing()}"})
    config = {"store": {"backend": backend, "url": url.render_as_string(hide_password=False)}}
    with counted() as attempts, pytest.raises(ConfigError, match="CREATE SCHEMA"):
        open_service(config)
    assert len(attempts.creates) == 1
