"""Statements carrying many messages fit the server's limits (SQLite, with limits forced low).

The limits are what ``Database.limits()`` asked the server; here they are set small so that
a few messages already need several statements, and the splitting is pinned by counting the
statements sent.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.exc import OperationalError

from imbucket.adapters.sql.faults import translate
from imbucket.adapters.sql.sizing import (
    STATEMENT_OVERHEAD,
    StatementLimits,
    batches,
    value_bytes,
)
from imbucket.app import MessageService, open_service
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.errors import WriteRefused
from imbucket.domain.model import PURGED_SLOT, Slot
from imbucket.testing.factories import CONV, message

WIDE = "\U0001f600"
BIG = WIDE * 10_000  # 40,000 bytes of UTF-8, 10,000 characters


def service_with_limits(backend: str, limits: StatementLimits) -> MessageService:
    service = open_service({"store": {"backend": backend, "url": "sqlite://"}})
    db = service.store.db if backend == "sql-row" else service.store.repository.db  # type: ignore[attr-defined]
    db._limits = limits
    return service


def test_a_value_costs_its_utf8_bytes_and_escapes_not_its_characters() -> None:
    assert value_bytes(WIDE * 10) == 40 + 4
    assert value_bytes("a'b\\c\n") == 6 + 3 + 4
    assert value_bytes(7) == value_bytes(None) == 24


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(["\\", "'", '"', "\n", "\r", "\x00", "\x1a", "a", "é", WIDE])))
def test_every_escaped_character_costs_one_byte_more(value: str) -> None:
    escaped = sum(value.count(char) for char in "\\'\"\n\r\x00\x1a")
    assert value_bytes(value) == len(value.encode()) + escaped + 4


def test_batches_respect_bytes_and_parameters() -> None:
    limits = StatementLimits(STATEMENT_OVERHEAD + 100, 10)
    assert [list(b) for b in batches("abcde", [40, 40, 40, 10, 10], 2, limits)] == [
        ["a", "b"],
        ["c", "d", "e"],
    ]
    assert [len(b) for b in batches("abcdefg", [1] * 7, 3, limits)] == [3, 3, 1]
    with pytest.raises(WriteRefused):
        list(batches("ab", [10, 101], 1, limits))


def test_sql_row_splits_an_insert_by_encoded_bytes() -> None:
    # Each message is ~40 kB of UTF-8 but only 10,000 characters: counting characters
    # would put all 10 in one statement over the 150 kB limit.
    service = service_with_limits("sql-row", StatementLimits(150_000, 1000))
    batch = [message(seq, content=BIG) for seq in range(1, 11)]
    with EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
        assert service.store.insert(CONV, batch).inserted == tuple(range(1, 11))
    assert trips.writes == 4  # 3 + 3 + 3 + 1 messages of ~40 kB under 150 kB
    assert [slot.message for slot in service.store.get(CONV, list(range(1, 11))).values()] == batch


def test_sql_row_splits_an_insert_by_bind_parameters() -> None:
    service = service_with_limits("sql-row", StatementLimits(1 << 30, 50))
    with EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
        service.store.insert(CONV, [message(seq) for seq in range(1, 6)])
    assert trips.writes == 3  # 24 parameters a row, 50 a statement: 2 + 2 + 1 rows
    assert len(service.store.get(CONV, list(range(1, 6)))) == 5


def test_sql_bucket_writes_a_large_bucket_in_parts_all_or_nothing() -> None:
    service = service_with_limits("sql-bucket", StatementLimits(150_000, 1000))
    repository = service.store.repository  # type: ignore[attr-defined]
    doc = f"{CONV}:0"
    assert repository.create_bucket(doc, {9: PURGED_SLOT})
    batch = {index: message(index + 1, content=BIG) for index in range(8)}
    occupied = {**batch, 9: message(10, content=BIG)}  # the last part meets a purged slot
    assert not repository.write_messages(doc, occupied)
    assert all(
        slot.message is None for slot in repository.read({doc: list(range(8))})[doc].values()
    )
    with EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
        assert repository.write_messages(doc, batch)
    assert trips.writes == 3
    stored = repository.read({doc: list(range(8))})[doc]
    assert [stored[i].message for i in range(8)] == list(batch.values())


def test_sql_bucket_creates_a_large_bucket_in_parts() -> None:
    service = service_with_limits("sql-bucket", StatementLimits(150_000, 1000))
    repository = service.store.repository  # type: ignore[attr-defined]
    doc = f"{CONV}:0"
    slots = {index: Slot(message=message(index + 1, content=BIG)) for index in range(8)}
    assert repository.create_bucket(doc, slots)
    assert not repository.create_bucket(doc, slots)
    assert repository.read({doc: list(range(8))})[doc] == slots
    assert service.store.insert(CONV, [message(seq, content=BIG) for seq in range(9, 20)]).inserted


@pytest.mark.parametrize(
    "driver_error",
    [
        (1153, "Got a packet bigger than 'max_allowed_packet' bytes"),
        ("too many SQL variables",),
    ],
)
def test_a_statement_too_large_for_the_server_is_write_refused(
    driver_error: tuple[object, ...],
) -> None:
    error = OperationalError("INSERT …", {}, Exception(*driver_error))
    assert isinstance(translate(error), WriteRefused)
