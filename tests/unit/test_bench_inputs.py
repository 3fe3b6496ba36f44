"""Bench inputs: backend specs, config files, the seeded dataset, SQL statement kinds."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from imbucket.bench import runner
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.bench.instrument.roundtrips import sql_is_write
from imbucket.bench.spec import load_config, parse_backend, redact
from imbucket.domain.errors import ConfigError


def test_backend_spec_with_cache_and_sqlalchemy_url() -> None:
    spec = parse_backend("sql-row+redis@postgresql+psycopg://u:secret@db:5432/chat", "redis://r/1")
    assert (spec.store, spec.cache, spec.cache_url) == ("sql-row", "redis", "redis://r/1")
    assert spec.url == "postgresql+psycopg://u:secret@db:5432/chat"
    assert (spec.engine, spec.layout, spec.family) == ("postgresql", "row", "sql")
    assert spec.label == "sql-row/postgresql+redis"
    assert spec.config() == {
        "store": {"backend": "sql-row", "url": spec.url},
        "cache": {"backend": "redis", "url": "redis://r/1"},
    }
    assert redact(spec.url) == "postgresql+psycopg://u:***@db:5432/chat"


def test_backend_spec_with_the_cluster_cache() -> None:
    spec = parse_backend("memory+redis-cluster", "redis://10.0.0.5:7000")
    assert spec.config()["cache"] == {"backend": "redis-cluster", "url": "redis://10.0.0.5:7000"}


def test_plain_ids_name_their_engine() -> None:
    assert parse_backend("memory").label == "memory"
    assert parse_backend("sql-bucket").label == "sql-bucket/sqlite"
    assert parse_backend("mongo-bucket@mongodb://h/db").label == "mongo-bucket/mongodb"
    assert parse_backend("sql-row@mysql+pymysql://root@h/test").engine == "mysql"


@pytest.mark.parametrize("text", ["nosql", "memory+memcached", "sql-row@", "SQL-ROW"])
def test_bad_backend_specs_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_backend(text)


def test_config_file_lists_backends(tmp_path: Path) -> None:
    toml = tmp_path / "bench.toml"
    toml.write_text(
        'scale = "tiny"\nseed = 7\nredis_url = "redis://r/2"\n'
        'backends = ["memory+redis", "sql-bucket@sqlite:///x.db"]\n'
    )
    config = load_config(toml)
    assert (config.scale, config.seed) == ("tiny", 7)
    assert [b.label for b in config.backends] == ["memory+redis", "sql-bucket/sqlite"]
    assert config.backends[0].cache_url == "redis://r/2"
    as_json = tmp_path / "bench.json"
    as_json.write_text(json.dumps({"backends": [{"store": "sql-row", "url": "sqlite://"}]}))
    assert load_config(as_json).backends[0].store == "sql-row"
    as_json.write_text(json.dumps({"backends": [{"url": "sqlite://"}]}))
    with pytest.raises(ConfigError):
        load_config(as_json)


def test_dataset_is_the_same_for_the_same_seed() -> None:
    one, two = Dataset(SCALES["tiny"], 5), Dataset(SCALES["tiny"], 5)
    assert one.conversations == two.conversations
    assert one.batches() == two.batches()
    conv = one.largest
    assert one.message(conv, 17) == two.message(conv, 17)
    assert Dataset(SCALES["tiny"], 6).message(conv, 17) != one.message(conv, 17)


def test_a_batch_gives_the_same_messages_each_time_in_a_list_of_its_own() -> None:
    data = Dataset(SCALES["tiny"])
    batch = data.batches()[0]
    first = data.messages_of(batch)
    first.clear()  # a caller's list is its own: the next backend still gets every message
    again = data.messages_of(batch)
    assert [m.seq for m in again] == list(range(batch.first, batch.last + 1))
    assert again == [data.message(batch.conversation, m.seq) for m in again]


def test_batches_deliver_every_seq_once_in_order_at_most_100() -> None:
    data = Dataset(SCALES["tiny"])
    seen: dict[str, list[int]] = defaultdict(list)
    for batch in data.batches():
        assert 1 <= batch.size <= 100
        seen[batch.conversation.id] += range(batch.first, batch.last + 1)
    assert {c.id: list(range(1, c.size + 1)) for c in data.conversations} == seen


def test_sizes_are_skewed_and_small_is_about_100k() -> None:
    data = Dataset(SCALES["small"])
    summary = data.summary()
    assert 90_000 <= summary["messages"] <= 110_000
    assert summary["median_conversation"] <= 10
    assert summary["largest_conversation"] >= 10_000
    assert len(data.largest.members) >= SCALES["small"].hot_deleters
    for name in ("medium", "large"):
        giants = SCALES[name].giants
        assert giants and max(giants) >= 50_000


def test_content_lengths_have_a_long_tail() -> None:
    data = Dataset(SCALES["tiny"])
    lengths = sorted(len(m.content) for m in data.iter_messages())
    median, p99 = lengths[len(lengths) // 2], lengths[len(lengths) * 99 // 100]
    assert 15 <= median <= 60
    assert p99 >= 5 * median


@pytest.mark.parametrize(
    ("statement", "write"),
    [
        ("SELECT * FROM messages", False),
        ("  select 1", False),
        ("WITH x AS (SELECT 1) SELECT * FROM x", False),
        ("WITH x AS (SELECT 1) UPDATE t SET a = 1", True),
        ("INSERT INTO t VALUES (1)", True),
        ("UPDATE t SET a = 1", True),
        ("DELETE FROM t", True),
        ("PRAGMA foreign_keys", False),
    ],
)
def test_sql_statements_are_told_apart(statement: str, write: bool) -> None:
    assert sql_is_write(statement) is write


def test_a_bucket_backend_can_name_its_encoding() -> None:
    spec = parse_backend("sql-bucket:openim+redis@postgresql+psycopg://db/chat", "redis://r/1")
    assert (spec.store, spec.encoding, spec.cache) == ("sql-bucket", "openim", "redis")
    assert spec.label == "sql-bucket/postgresql+redis[openim]"
    assert spec.config()["store"]["bucket_encoding"] == "openim"
    assert "bucket_encoding" not in parse_backend("sql-bucket").config()["store"]
    for wrong in ("sql-row:openim", "memory:compact", "sql-bucket:gzip"):
        with pytest.raises(ConfigError, match="encoding"):
            parse_backend(wrong)


def test_a_run_from_a_checkout_records_the_commit_that_ran() -> None:
    """The report names the commit, so a reader can tell which code gave the numbers."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=Path(runner.__file__).resolve().parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert runner.git_info().commit == head != ""


def test_nothing_is_counted_while_unwatched_and_counting_resumes_after(tmp_path: Path) -> None:
    from imbucket.app import open_service
    from imbucket.bench.instrument.roundtrips import RoundTrips, unwatched, watch

    url = f"sqlite:///{tmp_path / 'counted.sqlite'}"
    with (
        open_service({"store": {"backend": "sql-row", "url": url}}) as service,
        watch(RoundTrips()) as trips,
    ):
        service.max_seq("sg_a")
        counted = trips.snapshot().total
        with unwatched():
            service.max_seq("sg_a")
            with watch(RoundTrips()) as inner:  # a counter opened inside counts alone
                service.max_seq("sg_a")
            assert inner.snapshot().total == counted
        assert trips.snapshot().total == counted
        service.max_seq("sg_a")
        assert trips.snapshot().total == counted * 2 > 0
