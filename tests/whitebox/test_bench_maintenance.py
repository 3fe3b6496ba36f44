"""The benchmark's routine maintenance: VACUUM of a PostgreSQL store's tables, the write-back
of MariaDB's page-compressed bucket table, nothing elsewhere.

The servers here run with ``autovacuum = off``; the benchmark vacuums what autovacuum would,
after each workload (bench/instrument/maintenance.py). It must reach every table of the store,
on a connection the round-trip counters never see, and leave the data as it was. On MariaDB
the bucket table's footprint counts its compressed pages once written back, which the step
does.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from imbucket.app.service import MessageService
from imbucket.bench.instrument.maintenance import cluster_rows, routine_maintenance
from imbucket.bench.instrument.probe import probing
from imbucket.domain.model import Actor
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import store_config


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_postgres_stores_vacuum_every_table_unseen_by_the_counters(
    postgres_url: str, backend: str
) -> None:
    with probing() as probe:
        service = probe.open_service(store_config(backend, postgres_url))
        try:
            service.ingest(CONV, messages(1, 30))
            service.delete_for_me(CONV, [3, 4], "bob")
            service.revoke(CONV, 5, Actor(messages(5, 5)[0].send_id))
            before = service.pull_range(CONV, "bob", 1, 30)
            routine = routine_maintenance(service.store)
            assert routine is not None
            vacuum, description = routine
            assert description.startswith("VACUUM after each workload")
            assert "autovacuum = " in description
            count = probe.count(vacuum)
            assert count.total == 0, count
            engine = service.store.engine  # type: ignore[attr-defined]
            with engine.connect() as connection:
                vacuumed = connection.execute(
                    text(
                        "SELECT relname, vacuum_count FROM pg_stat_user_tables"
                        " WHERE schemaname = current_schema()"
                    )
                ).all()
            assert vacuumed and all(n >= 1 for _, n in vacuumed), vacuumed
            assert service.pull_range(CONV, "bob", 1, 30) == before
        finally:
            service.close()


def test_a_mariadb_bucket_store_counts_its_pages_compressed_once_written_back(
    mariadb_url: str,
) -> None:
    with probing() as probe:
        service = probe.open_service(store_config("sql-bucket", mariadb_url))
        try:
            service.ingest(CONV, messages(1, 1_000))
            service.ingest(CONV, messages(1_001, 2_000))
            service.delete_for_me(CONV, [3, 4], "bob")
            before = service.pull_range(CONV, "bob", 1, 100)
            routine = routine_maintenance(service.store)
            assert routine is not None
            write_back, description = routine
            assert "FLUSH" in description
            count = probe.count(write_back)
            assert count.total == 0, count
            stats = service.stats()
            catalog = _catalog_bytes(service, "imb_bucket_docs")
            # Written back, the pages count their compressed size: less than the catalog's
            # whole pages, more than the few a file holds before any write-back.
            assert catalog / 8 < stats.data_bytes + stats.index_bytes < catalog * 3 / 4, (
                stats,
                catalog,
            )
            assert service.pull_range(CONV, "bob", 1, 100) == before
        finally:
            service.close()


def test_a_mariadb_account_without_reload_gets_a_step_that_says_it_wrote_nothing_back(
    mariadb_url: str,
) -> None:
    url = make_url(mariadb_url)
    admin = create_engine(url)
    account = f"imb_{uuid.uuid4().hex[:12]}"
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE USER '{account}'@'%%' IDENTIFIED BY 'x'")
        connection.exec_driver_sql(f"GRANT ALL ON `{url.database}`.* TO '{account}'@'%%'")
    try:
        limited = url.set(username=account, password="x").render_as_string(hide_password=False)
        with probing() as probe:
            service = probe.open_service(store_config("sql-bucket", limited))
            try:
                service.ingest(CONV, messages(1, 30))
                before = service.pull_range(CONV, "bob", 1, 30)
                routine = routine_maintenance(service.store)
                assert routine is not None
                step, description = routine
                assert "not written back" in description and "RELOAD" in description
                step()
                assert service.pull_range(CONV, "bob", 1, 30) == before
            finally:
                service.close()
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP USER '{account}'@'%%'")
        admin.dispose()


def _catalog_bytes(service: MessageService, table: str) -> int:
    """The catalog's (uncompressed) data + index bytes of one of the store's tables."""
    engine = service.store.engine  # type: ignore[attr-defined]
    with engine.connect() as connection:
        found = connection.execute(
            text(
                "SELECT DATA_LENGTH + INDEX_LENGTH, CREATE_OPTIONS FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :table"
            ),
            {"table": table},
        ).one()
    assert "page_compressed" in found[1].lower(), found
    return int(found[0])


@pytest.mark.parametrize("backend", ["memory", "sql-row", "sql-bucket"])
def test_engines_that_reclaim_by_themselves_get_no_step(backend: str) -> None:
    url = "" if backend == "memory" else "sqlite://"
    with probing() as probe:
        service = probe.open_service(store_config(backend, url))
        try:
            assert routine_maintenance(service.store) is None
        finally:
            service.close()


def test_clustering_a_postgres_row_store_orders_its_heap_by_conversation_and_seq(
    postgres_url: str,
) -> None:
    with probing() as probe:
        service = probe.open_service(store_config("sql-row", postgres_url))
        try:
            for first in range(1, 60, 10):  # two conversations' messages arrive interleaved
                for conversation in ("sg_b", "sg_a"):
                    service.ingest(conversation, messages(first, first + 9, conversation))
            before = service.pull_range("sg_a", "bob", 1, 60)
            assert _heap_order(service) != sorted(_heap_order(service))
            description = cluster_rows(service.store)
            assert description.startswith("CLUSTER by primary key")
            assert _heap_order(service) == sorted(_heap_order(service))
            assert service.pull_range("sg_a", "bob", 1, 60) == before
        finally:
            service.close()


def test_clustering_rows_is_refused_on_other_engines(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rows.sqlite'}"
    with probing() as probe:
        service = probe.open_service(store_config("sql-row", url))
        try:
            with pytest.raises(ValueError, match="PostgreSQL"):
                cluster_rows(service.store)
        finally:
            service.close()


def _heap_order(service: MessageService) -> list[tuple[str, int]]:
    """The message rows' (conversation_id, seq) in the order the heap holds them."""
    engine = service.store.engine  # type: ignore[attr-defined]
    table = service.store.schema.messages.name  # type: ignore[attr-defined]
    with engine.connect() as connection:
        rows = connection.execute(text(f"SELECT conversation_id, seq FROM {table} ORDER BY ctid"))
        return [(conversation, seq) for conversation, seq in rows]
