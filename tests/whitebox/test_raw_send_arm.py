"""The benchmark's raw send arm: the fewest statements per engine, and the send it stores.

Counts only, never times: the send workload divides the service's calls per second by this
arm's, so it must do a fresh send's work (claim, allocate, store) in the statements its
module names (bench/instrument/raw_send.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from imbucket.app import MessageService
from imbucket.app.service import now_ms
from imbucket.bench.instrument.raw_send import RawSend
from imbucket.testing.factories import draft
from imbucket.testing.rows import SQL, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(SQL), indirect=True)

# The statements of one raw send, transaction control included (spent by hand here).
STATEMENTS = {"postgresql": 1, "sqlite": 5, "mysql": 5}


class CountedCursor:
    """A DBAPI cursor recording the statements it executes."""

    def __init__(self, cursor: Any, seen: list[str]) -> None:
        self._cursor, self._seen = cursor, seen

    def execute(self, statement: str, *args: Any) -> Any:
        self._seen.append(statement)
        return self._cursor.execute(statement, *args)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def close(self) -> None:
        self._cursor.close()


class Counted:
    """A DBAPI connection whose cursors record every statement they execute."""

    def __init__(self, connection: Any, seen: list[str]) -> None:
        self._connection, self._seen = connection, seen

    def cursor(self) -> Any:
        return CountedCursor(self._connection.cursor(), self._seen)

    def close(self) -> None:
        self._connection.close()


def test_the_raw_arm_claims_allocates_and_stores_in_the_fewest_statements(
    service: MessageService, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine: Any = service.seqs.engine  # type: ignore[attr-defined]
    raw = RawSend(engine)
    conversation = f"raw-{uuid.uuid4().hex[:8]}"
    assert raw.send(conversation, draft(0), now_ms()) == 1
    seen: list[str] = []
    connect = engine.raw_connection
    with monkeypatch.context() as patched:  # engine.connect() checks out through it too
        patched.setattr(engine, "raw_connection", lambda: Counted(connect(), seen))
        assert raw.send(conversation, draft(1), now_ms()) == 2
    assert len(seen) == STATEMENTS[engine.dialect.name], seen
    messages, sends = raw.schema.messages, raw.schema.sends
    with engine.connect() as connection:
        stored = connection.execute(
            select(func.count(messages.c.send_id)).where(messages.c.conversation_id == conversation)
        ).scalar_one()
        claims = connection.execute(
            select(func.count()).where(sends.c.conversation_id == conversation)
        ).scalar_one()
    assert (stored, claims) == (2, 2)
