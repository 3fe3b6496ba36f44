"""sql-bucket's fresh send on PostgreSQL: counter, claims and buckets in one statement.

What the one statement must keep of the two-statement send (docs/sending.md): the buckets
hold what the store's own insert writes (compact and OpenIM encodings, a new bucket and an
existing one, a batch across two buckets); a purged slot leaves its bucket to the store's
insert and the general path, a revoke-only slot is filled; a refusal of the statement by
the engine leaves nothing written and the general path gives the seqs up; messages too
large for the statement's budget take the step and the insert.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text

from imbucket.adapters.sql.bucket_send import FRESH_BYTES
from imbucket.app import MessageService
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.errors import WriteConflict
from imbucket.domain.model import Revoke, Role, Slot
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, draft
from tests.whitebox.pg_refusal import (
    REFUSED,
    check_a_refused_statement_gives_its_seqs_up,
    refusing_writes,
)

pytestmark = pytest.mark.parametrize(
    "backend_config",
    [
        pytest.param("sql_bucket_postgres_config", id="sql-bucket-postgres"),
        pytest.param("sql_bucket_postgres_openim_config", id="sql-bucket-postgres-openim"),
    ],
    indirect=True,
)


def counter(service: MessageService) -> EngineStatements:
    return EngineStatements(service.store.engine)  # type: ignore[attr-defined]


def stored_buckets(service: MessageService) -> dict[str, Any]:
    """Every bucket of the table as the engine holds it (decoded JSON by doc_id)."""
    table = service.store.schema.docs.name  # type: ignore[attr-defined]
    with service.store.engine.connect() as connection:  # type: ignore[attr-defined]
        rows = connection.execute(text(f"SELECT doc_id, msgs FROM {table}")).all()
    return {doc_id: msgs for doc_id, msgs in rows}


@pytest.fixture
def refusing(service: MessageService) -> Iterator[MessageService]:
    """The service, its bucket table refusing a bucket holding the text REFUSED."""
    table = service.store.schema.docs.name  # type: ignore[attr-defined]
    engine = service.store.engine  # type: ignore[attr-defined]
    with refusing_writes(engine, table, f"position('{REFUSED}' in CAST(NEW.msgs AS text)) > 0"):
        yield service


def test_each_send_is_one_statement_creating_filling_and_crossing_buckets(
    service: MessageService,
) -> None:
    batches = [[draft(0)], [draft(n) for n in range(1, 99)], [draft(n) for n in range(99, 150)]]
    with counter(service) as trips:
        for batch in batches:
            service.send(CONV, batch)
    # A new bucket, the rest of it, then its last slot and a new bucket's first 50.
    assert (trips.total, trips.writes) == (3, 3), trips.statements
    entries = service.pull(CONV, "bob", list(range(1, 151)))
    assert [(e.seq, e.message.client_msg_id) for e in entries] == [  # type: ignore[union-attr]
        (n + 1, f"draft-{n}") for n in range(150)
    ]
    assert service.max_seq(CONV) == 150


def test_the_buckets_hold_what_the_codec_writes(service: MessageService) -> None:
    # One message opening a bucket, one filling it, a batch, a batch crossing into a new
    # bucket and one message filling that.
    batches = [[draft(0)], [draft(1)], [draft(n) for n in range(2, 99)]]
    batches += [[draft(n) for n in range(99, 149)], [draft(149)]]
    for batch in batches:
        service.send(CONV, batch)
    repository: Any = service.store.repository  # type: ignore[attr-defined]
    layout = repository.layout
    entries = service.pull(CONV, "bob", list(range(1, 151)))
    expected: dict[str, dict[int, Slot]] = {}
    for entry in entries:
        assert isinstance(entry, MessageView)
        doc_id = layout.doc_id(CONV, entry.seq)
        expected.setdefault(doc_id, {})[layout.slot_index(entry.seq)] = Slot(message=entry.message)
    # Byte for byte what the store's own insert writes (``whole``), seqs included where the
    # encoding stores them.
    assert stored_buckets(service) == {
        doc_id: json.loads(repository.whole(slots)) for doc_id, slots in expected.items()
    }


def test_a_purged_slot_is_settled_by_the_general_path(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    # seq 3 purged ahead of max_seq: the statement leaves the bucket as it was; the store's
    # insert then stores seq 2 and the general path finds seq 3 purged, as after the
    # two-statement send.
    service.store.purge(CONV, [3])
    with counter(service) as trips, pytest.raises(WriteConflict):
        service.send(CONV, [draft(1), draft(2)])
    assert trips.total > 1, trips.statements
    assert service.max_seq(CONV) == 3  # allocated once
    (first,) = service.pull(CONV, "bob", [2])
    assert isinstance(first, MessageView) and first.message.client_msg_id == "draft-1"


def test_a_purged_slot_refuses_a_single_message_too(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    service.store.purge(CONV, [2])
    with pytest.raises(WriteConflict):
        service.send(CONV, [draft(1)])
    assert service.max_seq(CONV) == 2
    assert service.pull(CONV, "bob", [2]) == [Tombstone(2, TombstoneReason.PURGED)]
    assert [m.seq for m in service.send(CONV, [draft(3)])] == [3]


def test_a_revoke_only_slot_is_filled_in_the_statement(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    service.store.revoke(CONV, 3, Revoke("carol", Role.ADMIN, "", 1))
    with counter(service) as trips:
        sent = service.send(CONV, [draft(1), draft(2)])
    assert [m.seq for m in sent] == [2, 3]
    assert trips.total == 1, trips.statements
    second = service.pull(CONV, "bob", [3])[0]
    # Filled as the store's insert fills it: the message joins the revoke already there.
    assert isinstance(second, MessageView) and second.message.client_msg_id == "draft-2"
    assert second.revoked is not None


def test_a_statement_the_engine_refuses_gives_its_seqs_up_on_the_general_path(
    refusing: MessageService,
) -> None:
    check_a_refused_statement_gives_its_seqs_up(refusing)


def test_messages_beyond_the_statements_budget_take_the_step_and_the_insert(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(0)])
    content = "x" * (FRESH_BYTES // 20)
    batch = [replace(draft(n), content=content) for n in range(1, 25)]
    with counter(service) as trips:
        sent = service.send(CONV, batch)
    assert [m.seq for m in sent] == list(range(2, 26))
    assert "stored AS (INSERT" not in trips.statements[0]
    assert trips.total >= 2, trips.statements
    assert all(e.content == content for e in service.pull(CONV, "bob", [2, 25]))  # type: ignore[union-attr]
