"""SQL-specific behaviour that needs no server: URLs, SQLite files, layout record, key sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.schema import KEY_LENGTH, drop_schema, row_schema
from imbucket.app import MessageService, open_service
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.errors import ConfigError, InvalidArgument, LayoutMismatch, StoreUnavailable
from imbucket.testing.factories import CONV, messages

STORES = ("sql-row", "sql-bucket")


def sqlite_file(path: Path, backend: str, **store: object) -> MessageService:
    config = {"store": {"backend": backend, "url": f"sqlite:///{path}", **store}}
    return open_service(config)


@pytest.mark.parametrize("backend", STORES)
def test_a_sqlite_file_keeps_its_data_and_its_layout(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "store.db"
    with sqlite_file(path, backend) as service:
        service.ingest(CONV, messages(1, 5))
    with sqlite_file(path, backend) as service:
        assert service.max_seq(CONV) == 5
        assert sorted(service.store.get(CONV, [1, 5, 6])) == [1, 5]
    with pytest.raises(LayoutMismatch, match="bucket size 100"):
        sqlite_file(path, backend, bucket_size=10)


def test_row_and_bucket_stores_share_a_database_without_sharing_counters(
    tmp_path: Path,
) -> None:
    path = tmp_path / "both.db"
    with sqlite_file(path, "sql-row") as rows, sqlite_file(path, "sql-bucket") as buckets:
        rows.ingest(CONV, messages(1, 3))
        assert buckets.max_seq(CONV) == 0
        assert buckets.stats().messages == 0


def test_another_layout_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    sqlite_file(path, "sql-row").close()
    db, schema = Database(f"sqlite:///{path}"), row_schema()
    db.execute(update(schema.layout).values(version=99))
    db.close()
    with pytest.raises(LayoutMismatch, match="version 99"):
        sqlite_file(path, "sql-row")


def test_drop_schema_removes_every_table(tmp_path: Path) -> None:
    path = tmp_path / "dropped.db"
    sqlite_file(path, "sql-row").close()
    db = Database(f"sqlite:///{path}")
    drop_schema(db, row_schema())
    names = db.run(lambda c: c.exec_driver_sql("SELECT name FROM sqlite_master").all())
    db.close()
    assert names == []


@pytest.mark.parametrize("backend", STORES)
def test_an_empty_url_is_an_in_memory_sqlite_database(backend: str) -> None:
    with open_service({"store": {"backend": backend, "url": ""}}) as service:
        service.ingest(CONV, messages(1, 2))
        assert service.stats().messages == 2


@pytest.mark.parametrize("url", ["oracle://scott@db/orcl", "not a url", "mongodb://localhost"])
def test_urls_of_other_engines_are_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        open_service({"store": {"backend": "sql-row", "url": url}})


@pytest.mark.parametrize(
    "url",
    ["postgresql+psycopg://postgres@127.0.0.1:1/test", "mysql+pymysql://root@127.0.0.1:1/test"],
)
def test_an_unreachable_server_is_store_unavailable(url: str) -> None:
    with pytest.raises(StoreUnavailable):
        open_service({"store": {"backend": "sql-bucket", "url": url}})


@pytest.mark.parametrize("backend", STORES)
def test_ids_longer_than_a_key_column_are_refused_before_writing(backend: str) -> None:
    # Ids this long need bigger buckets than the default limit allows (imbucket.domain.budget).
    store = {"backend": backend, "max_bucket_bytes": 16 * 1024 * 1024}
    config = {"store": store, "limits": {"max_id_length": 1000}}
    with open_service(config) as service:
        long_id = "c" * (KEY_LENGTH + 1)
        with pytest.raises(InvalidArgument):
            service.ingest(long_id, messages(1, 1, long_id))
        with pytest.raises(InvalidArgument):
            service.clear_history(CONV, "u" * (KEY_LENGTH + 1))
        assert service.stats().messages == 0


def test_round_trips_ignore_transaction_control() -> None:
    db = Database("sqlite://")
    db.run(lambda c: c.exec_driver_sql("CREATE TABLE t (x INTEGER)"))
    with EngineStatements(db.engine) as trips:
        db.run(lambda c: c.exec_driver_sql("SELECT 1").all(), atomic=True)  # BEGIN … COMMIT
        db.run(lambda c: c.exec_driver_sql("INSERT INTO t VALUES (1)"))
    db.run(lambda c: c.exec_driver_sql("SELECT 2"))  # detached: not counted
    db.close()
    assert (trips.total, trips.reads, trips.writes) == (2, 1, 1), trips.statements
    trips.reset()
    assert trips.total == 0


@pytest.mark.parametrize(("created", "reopened"), [("compact", "openim"), ("openim", "compact")])
def test_a_bucket_store_keeps_its_encoding(tmp_path: Path, created: str, reopened: str) -> None:
    path = tmp_path / "buckets.db"
    with sqlite_file(path, "sql-bucket", bucket_encoding=created) as service:
        service.ingest(CONV, messages(1, 5))
    with pytest.raises(LayoutMismatch, match=f'store.bucket_encoding = "{created}"'):
        sqlite_file(path, "sql-bucket", bucket_encoding=reopened)
    with sqlite_file(path, "sql-bucket", bucket_encoding=created) as service:
        assert [slot.message for slot in service.store.get(CONV, [1, 5]).values()] == [
            messages(1, 1)[0],
            messages(5, 5)[0],
        ]


def test_sql_bucket_writes_compact_buckets_unless_told_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "default.db"
    with sqlite_file(path, "sql-bucket") as service:
        service.ingest(CONV, messages(1, 1))
        assert service.layout.encoding == "compact"
    with pytest.raises(LayoutMismatch, match="compact"):
        sqlite_file(path, "sql-bucket", bucket_encoding="openim")
