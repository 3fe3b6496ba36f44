"""The benchmark's scratch namespaces are dropped at the end, also across a server restart.

A cold run of the memory budget restarts its private server while a scratch schema is open;
the drop at the end must reach the server again (a new connection), not fail on one the
server closed, which would leave the schema behind and warn the user about it.
"""

from __future__ import annotations

import uuid
import warnings

from sqlalchemy import create_engine, make_url, text

from imbucket.bench.instrument.scratch import scratch_store
from tests.sql_servers import postgres_server


def _schemas(server: str, name: str) -> int:
    engine = create_engine(server)
    try:
        with engine.connect() as connection:
            query = text("SELECT count(*) FROM pg_namespace WHERE nspname = :name")
            return int(connection.execute(query, {"name": name}).scalar_one())
    finally:
        engine.dispose()


def _close_connections(server: str, application: str) -> None:
    """What a restart does to the connections of a scratch's admin engine (only theirs)."""
    engine = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            query = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            query += " WHERE application_name = :application"
            connection.execute(text(query), {"application": application})
    finally:
        engine.dispose()


def test_a_scratch_schema_is_dropped_after_its_server_closed_the_connections() -> None:
    server = postgres_server()
    name = f"imb_scratch_{uuid.uuid4().hex[:12]}"
    admin = make_url(server).update_query_dict({"application_name": name})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed cleanup warns
        with scratch_store(admin.render_as_string(hide_password=False), name):
            assert _schemas(server, name) == 1
            _close_connections(server, name)
    assert _schemas(server, name) == 0
