"""The SQL read fast path: statements built once per store, no retry loop unless a try fails.

Counts calls, never times: SQLAlchemy coerces every argument of a statement it builds
(``coercions.expect``), so a pull on statements built at open coerces nothing; the
engine's retry loop (``Database._retry``) only runs after a failed attempt.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.sql import coercions
from sqlalchemy.sql.compiler import SQLCompiler

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.json_sql import JsonSql
from imbucket.app import MessageService
from imbucket.testing.factories import CONV, draft, messages
from tests.contract.conftest import SQL, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(SQL), indirect=True)

PULLS = {
    "pull_latest": lambda service: service.pull_latest(CONV, "bob", 20),
    "pull_range": lambda service: service.pull_range(CONV, "bob", 11, 110),
    "pull scattered": lambda service: service.pull(CONV, "bob", [3, 7, 120, 250]),
}


def count_coercions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, count SQLAlchemy's coercions (one per argument of a statement it builds)
    in the returned one-item list."""
    coerced = [0]
    expect = coercions.expect

    def counted(*args: Any, **kwargs: Any) -> Any:
        coerced[0] += 1
        return expect(*args, **kwargs)

    monkeypatch.setattr(coercions, "expect", counted)
    return coerced


@pytest.mark.parametrize("pull", PULLS.values(), ids=PULLS.keys())
def test_a_pull_builds_no_statement_and_enters_no_retry_loop(
    service: MessageService, pull: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.ingest(CONV, messages(1, 250))
    service.delete_for_me(CONV, [7], "bob")
    pull(service)  # warms lazy engine setup

    def no_retry(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the retry loop ran without a failed attempt")

    coerced = count_coercions(monkeypatch)
    monkeypatch.setattr(Database, "_retry", no_retry)
    assert len(pull(service)) in (4, 20, 100)
    assert coerced == [0]


SEQ_WRITES = {
    "raise_max_seq": lambda seqs, n: seqs.raise_max_seq(CONV, 300 + n),
    "raise_min_seq": lambda seqs, n: seqs.raise_min_seq(CONV, 2 + n),
    "raise_read_seq": lambda seqs, n: seqs.raise_read_seq(CONV, "bob", 5 + n),
    "allocate": lambda seqs, n: seqs.allocate(CONV, 1 + n),
}


@pytest.mark.parametrize("write", SEQ_WRITES.values(), ids=SEQ_WRITES.keys())
def test_a_watermark_upsert_is_built_once_per_store(
    service: MessageService, write: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ingest raises max_seq: its upsert is built at the first call and bound after."""
    write(service.seqs, 0)  # builds the statement
    coerced = count_coercions(monkeypatch)
    write(service.seqs, 1)
    assert coerced == [0]


def test_a_fresh_send_builds_no_statement(
    service: MessageService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fresh send's step (and on PostgreSQL sql-row its rows) is built once per store."""
    service.send(CONV, [draft(0)])  # builds the statements
    coerced = count_coercions(monkeypatch)
    assert [m.seq for m in service.send(CONV, [draft(1)])] == [2]
    assert coerced == [0]


def test_a_fresh_send_compiles_nothing_once_its_shape_was_sent(
    service: MessageService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second send to a new conversation fills the same slot: its statements, their SQL
    text and their parameters come from what the first one built."""
    service.send("sg_first", [draft(1)])  # builds the statements of this shape
    calls = {"compile": 0, "construct_params": 0, "json set": 0}

    def counting(owner: Any, name: str, key: str) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    counting(SQLCompiler, "__init__", "compile")
    counting(SQLCompiler, "construct_params", "construct_params")
    counting(JsonSql, "set", "json set")
    coerced = count_coercions(monkeypatch)
    [sent] = service.send("sg_second", [draft(2)])
    assert sent.seq == 1
    assert calls == {"compile": 0, "construct_params": 0, "json set": 0}
    assert coerced == [0]
