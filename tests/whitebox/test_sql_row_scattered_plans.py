"""sql-row on PostgreSQL: a read of scattered seqs looks each seq up, under every plan.

psycopg prepares a statement it runs often, and PostgreSQL may then run its generic plan,
planned without the parameters' values: a conversation is sized at the table's average. On a
table in key order (``cluster_rows``) with one large conversation among many small ones,
such a plan could read the whole conversation by its id and filter the seqs. Here every
read of scattered seqs (a pull, the herd's pull, the tag writes' reads) is planned generic
(``plan_cache_mode = force_generic_plan``) and run: the messages it reads are the wanted
ones, found through the primary key by conversation and seq.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import ClauseElement, Engine

from imbucket.adapters.sql.row_pulls import SqlRowPulls
from imbucket.app.service import MessageService
from imbucket.bench.instrument.maintenance import cluster_rows
from imbucket.bench.instrument.probe import probing
from imbucket.testing.factories import messages
from imbucket.testing.rows import store_config
from tests.sql_servers import postgres_schema, postgres_server

BIG = "sg_big"
SEQS = list(range(7, 3_000, 150))  # twenty seqs spread over the large conversation


@pytest.fixture(scope="module")
def clustered(postgres_module_url: str) -> Iterator[MessageService]:
    """A sql-row store: one large conversation, many of two messages, clustered, analyzed."""
    with probing() as probe:
        service = probe.open_service(store_config("sql-row", postgres_module_url))
        try:
            for first in range(1, 3_001, 500):
                service.ingest(BIG, messages(first, first + 499, BIG))
            for n in range(1_000):
                service.ingest(f"sg_{n}", messages(1, 2, f"sg_{n}"))
            service.delete_for_me(BIG, SEQS[:2], "bob")
            service.mark_read(BIG, SEQS[2:4], "carol")
            cluster_rows(service.store)
            yield service
        finally:
            service.close()


@pytest.fixture(scope="module")
def postgres_module_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for this module's tests, dropped afterwards."""
    with postgres_schema(postgres_server()) as url:
        yield url


def _statements(service: MessageService) -> dict[str, tuple[ClauseElement, dict[str, Any]]]:
    store: Any = service.store
    reads = store.repository._reads
    of = {"conversation_id": BIG, "seqs": SEQS}
    viewer = {**of, "user_id": "bob", "viewer": "bob"}
    herd = {**of, "viewers": ["bob", "carol"], "floor_viewers": ["bob", "carol"]}
    return {
        "pull": (reads.pulled[True], viewer),
        "herd pull": (SqlRowPulls(store)._reads["scattered"], herd),
        "tagged read": (reads.tagged[True], of),
        "viewed read": (reads.viewed[True], viewer),
        "state read": (reads.state[True], of),
    }


@pytest.mark.parametrize("name", ["pull", "herd pull", "tagged read", "viewed read", "state read"])
def test_a_generic_plan_reads_only_the_wanted_messages(
    clustered: MessageService, name: str
) -> None:
    statement, params = _statements(clustered)[name]
    store: Any = clustered.store
    plan = _generic_plan(store.engine, statement, params)
    table = store.schema.messages.name
    scans = [node for node in _nodes(plan) if node.get("Relation Name") == table]
    assert scans, plan
    for scan in scans:
        assert "seq" in scan.get("Index Cond", ""), scan
        assert scan.get("Rows Removed by Filter", 0) == 0, scan
    assert sum(scan["Actual Rows"] * scan["Actual Loops"] for scan in scans) == len(SEQS)


def test_a_scattered_pull_answers_the_same_once_prepared(clustered: MessageService) -> None:
    first = clustered.pull(BIG, "bob", SEQS)
    assert [entry.seq for entry in first] == SEQS  # the two bob deleted as tombstones
    for _ in range(6):  # past psycopg's prepare threshold
        assert clustered.pull(BIG, "bob", SEQS) == first


def _generic_plan(engine: Engine, statement: ClauseElement, params: dict[str, Any]) -> Any:
    """The statement's generic plan, run (EXPLAIN ANALYZE of a PREPAREd copy)."""
    state = statement.compile(dialect=engine.dialect).construct_expanded_state(params)
    order: list[str] = []

    def number(found: re.Match[str]) -> str:
        if found.group(1) not in order:
            order.append(found.group(1))
        return f"${order.index(found.group(1)) + 1}"

    sql = re.sub(r"%\((\w+)\)s", number, state.statement)
    raw = engine.raw_connection()
    try:
        cursor = psycopg.ClientCursor(raw.driver_connection)  # type: ignore[arg-type]
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE scattered AS {sql}")
        explain = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) EXECUTE scattered"
        values = [state.parameters[name] for name in order]
        cursor.execute(f"{explain}({', '.join(['%s'] * len(order))})", values)
        (document,) = cursor.fetchone() or ()
        cursor.execute("DEALLOCATE scattered")
        cursor.execute("RESET plan_cache_mode")
        return document[0]["Plan"]
    finally:
        raw.close()


def _nodes(plan: Any) -> Iterator[Any]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)
