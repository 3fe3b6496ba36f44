"""sql-row's fresh send on PostgreSQL: counter, claims and rows in one statement.

What the one statement must keep of the two-statement send (docs/sending.md): a refusal of
the statement by the engine leaves nothing written and the general path gives the seqs up;
rows that would not fit one statement, or a service storing through another insert than the
store's own, take the step and the insert; a seq holding a row already is settled by the
general path. ``tests/contract/test_refused_send.py`` covers the store's refusals on every
backend row (its injection wraps the store's insert, which sends such a service down the
two-statement path).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from imbucket.adapters.sql.row import FRESH_BYTES
from imbucket.adapters.sql.sizing import STATEMENT_OVERHEAD, StatementLimits
from imbucket.app import MessageService
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.model import InsertResult, Message, Revoke, Role
from imbucket.domain.projection import MessageView
from imbucket.testing.factories import CONV, draft
from tests.whitebox.pg_refusal import (
    REFUSED,
    check_a_refused_statement_gives_its_seqs_up,
    refusing_writes,
)

pytestmark = pytest.mark.parametrize(
    "backend_config",
    [pytest.param("sql_row_postgres_config", id="sql-row-postgres")],
    indirect=True,
)


def counter(service: MessageService) -> EngineStatements:
    return EngineStatements(service.store.engine)  # type: ignore[attr-defined]


@pytest.fixture
def refusing(service: MessageService) -> Iterator[MessageService]:
    """The service, its messages table refusing a row whose content is REFUSED."""
    table = service.store.schema.messages.name  # type: ignore[attr-defined]
    engine = service.store.engine  # type: ignore[attr-defined]
    with refusing_writes(engine, table, f"NEW.content = '{REFUSED}'"):
        yield service


def test_a_fresh_send_is_one_statement(service: MessageService) -> None:
    service.send(CONV, [draft(0)])
    with counter(service) as trips:
        sent = service.send(CONV, [draft(n) for n in range(1, 4)])
    assert [m.seq for m in sent] == [2, 3, 4]
    assert (trips.total, trips.writes) == (1, 1), trips.statements
    assert [e.content for e in service.pull(CONV, "bob", [2, 3, 4])] == [  # type: ignore[union-attr]
        "draft 1",
        "draft 2",
        "draft 3",
    ]
    assert service.max_seq(CONV) == 4


def test_a_statement_the_engine_refuses_gives_its_seqs_up_on_the_general_path(
    refusing: MessageService,
) -> None:
    check_a_refused_statement_gives_its_seqs_up(refusing)


def test_rows_too_large_for_one_statement_take_the_step_and_the_split_insert(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(0)])
    db: Any = service.store.db  # type: ignore[attr-defined]
    # Room for one row of 1,000 characters per statement, not for three.
    db._limits = StatementLimits(STATEMENT_OVERHEAD + 2000, 65_535)
    batch = [replace(draft(n), content="x" * 1000) for n in range(1, 4)]
    with counter(service) as trips:
        sent = service.send(CONV, batch)
    assert [m.seq for m in sent] == [2, 3, 4]
    assert (trips.total, trips.writes) == (4, 4), trips.statements  # the step, 3 INSERTs
    assert all(isinstance(e, MessageView) for e in service.pull(CONV, "bob", [2, 3, 4]))


def test_rows_beyond_the_array_budget_take_the_step_and_the_insert(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(0)])
    # Bound as arrays, each value goes in the text of one literal: past FRESH_BYTES the rows
    # go as the store's scalar rows instead (one INSERT here).
    content = "x" * (FRESH_BYTES // 20)
    batch = [replace(draft(n), content=content) for n in range(1, 9)]
    with counter(service) as trips:
        sent = service.send(CONV, batch)
    assert [m.seq for m in sent] == list(range(2, 10))
    assert (trips.total, trips.writes) == (2, 2), trips.statements


def test_a_service_storing_through_another_insert_takes_the_step_and_that_insert(
    service: MessageService,
) -> None:
    store: Any = service.store
    original = store.insert
    through: list[int] = []

    def insert(conversation_id: str, messages: list[Message]) -> InsertResult:
        through.extend(m.seq for m in messages)
        result: InsertResult = original(conversation_id, messages)
        return result

    store.insert = insert
    with counter(service) as trips:
        sent = service.send(CONV, [draft(1), draft(2)])
    assert [m.seq for m in sent] == through == [1, 2]
    assert (trips.total, trips.writes) == (2, 2), trips.statements


def test_a_seq_holding_a_row_already_is_settled_by_the_general_path(
    service: MessageService,
) -> None:
    service.send(CONV, [draft(0)])
    # A revoke-only row at seq 3, beyond max_seq: the statement's INSERT skips that seq.
    service.store.revoke(CONV, 3, Revoke("carol", Role.ADMIN, "", 1))
    sent = service.send(CONV, [draft(1), draft(2)])
    assert [m.seq for m in sent] == [2, 3]
    assert service.max_seq(CONV) == 3  # allocated once
    first, second = service.pull(CONV, "bob", [2, 3])
    assert isinstance(first, MessageView) and first.message.client_msg_id == "draft-1"
    # The general path stored draft 2 into the revoke-only row, as the store's insert does.
    assert isinstance(second, MessageView) and second.message.client_msg_id == "draft-2"
    assert second.revoked is not None
