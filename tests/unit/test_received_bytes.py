"""bench.instrument.received counts the reply bytes the drivers hand over, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import create_engine, text

from imbucket.bench.instrument import received
from tests.redis_server import redis_prefix, redis_url


def test_sql_rows_are_counted_by_their_values() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT, blob BLOB)"))
        conn.execute(text("INSERT INTO t VALUES (1, 'héllo', x'00010203'), (2, NULL, NULL)"))
        with received.counting() as replies:
            rows = conn.execute(text("SELECT id, body, blob FROM t ORDER BY id")).all()
        # 8 per integer, 'héllo' is 6 UTF-8 bytes, the blob 4, NULLs nothing
        assert replies == {"sql": 8 + 6 + 4 + 8}
        assert rows[0] == (1, "héllo", b"\x00\x01\x02\x03")  # what the caller sees is intact
    engine.dispose()


def test_writes_keep_their_rowcount_and_nothing_is_counted_after_the_block() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
        with received.counting() as replies:
            inserted = conn.execute(text("INSERT INTO t VALUES (1, 'a'), (2, 'b')"))
            assert inserted.rowcount == 2
            returned = conn.execute(text("UPDATE t SET body = 'cc' RETURNING body")).all()
        assert sorted(returned) == [("cc",), ("cc",)]
        assert replies == {"sql": 4}
        conn.execute(text("SELECT body FROM t")).all()
        assert replies == {"sql": 4}
    engine.dispose()


def test_a_second_counting_block_at_once_is_refused() -> None:
    with (
        received.counting(),
        pytest.raises(RuntimeError, match="already active"),
        received.counting(),
    ):
        pass


def test_redis_replies_are_counted() -> None:
    import redis

    url = redis_url()
    with redis_prefix(url) as prefix:
        _count_redis(redis.Redis.from_url(url), f"{prefix}received")


def _count_redis(client: Any, key: str) -> None:
    try:
        client.set(key, b"x" * 100)
        with received.counting() as replies:
            assert client.get(key) == b"x" * 100
            with client.pipeline() as pipe:
                pipe.get(key)
                pipe.strlen(key)
                pipe.execute()
        assert replies == {"redis": 100 + 100 + 8}
    finally:
        client.close()
