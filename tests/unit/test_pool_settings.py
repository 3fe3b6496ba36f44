"""store.pool_size and store.max_overflow size an SQL server store's connection pool."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from imbucket.app import open_service
from imbucket.domain.errors import ConfigError, StoreUnavailable
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server
from tests.waits import returned

SERVERS: dict[str, tuple[Callable[[], str], Callable[[str], AbstractContextManager[str]]]] = {
    "postgres": (postgres_server, postgres_schema),
    "mariadb": (mariadb_server, mariadb_database),
}


@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_the_pool_holds_pool_size_plus_max_overflow_connections(server: str, backend: str) -> None:
    url_of, namespace = SERVERS[server]
    store = {"pool_size": 2, "max_overflow": 1, "pool_timeout_seconds": 0.2}
    with (
        namespace(url_of()) as url,
        open_service({"store": {"backend": backend, "url": url, **store}}) as service,
    ):
        engine = service.seqs.db.engine  # type: ignore[attr-defined]
        held = [engine.connect() for _ in range(2)]
        try:
            assert service.max_seq("c") == 0  # the overflow connection
            held.append(engine.connect())
            error = returned(lambda: service.max_seq("c"))
            assert isinstance(error, StoreUnavailable)
            assert "no free connection in the pool" in str(error)
        finally:
            for connection in held:
                connection.close()
        assert service.max_seq("c") == 0


@pytest.mark.parametrize(
    "store", [{"pool_size": 0}, {"max_overflow": -1}, {"pool_size": 1001}, {"max_overflow": 1001}]
)
def test_pool_sizes_out_of_bounds_are_config_errors(store: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match=r"store\.(pool_size|max_overflow)"):
        open_service({"store": {"backend": "sql-row", **store}})
