"""sql-row's latest and key-range pulls go out as prepared text, without a SQLAlchemy result.

Counts, never times: a statement run through ``Connection.execute`` builds a ``CursorResult``
(its execution context, result metadata and the driver's column description); the prepared
pulls (``adapters/sql/prepared.py``) build none, yet remain one statement at the engine
(``tests/whitebox/test_sql_pull_statements.py``) and answer as the contract suite says. A pull
of scattered seqs (an IN list) still goes through SQLAlchemy's result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import CursorResult

from imbucket.app import MessageService
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import ROW_LAYOUT, SQL, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(SQL, ROW_LAYOUT), indirect=True)

Pull = Callable[[MessageService], list[object]]
PREPARED: dict[str, Pull] = {
    "pull_latest(20)": lambda service: service.pull_latest(CONV, "bob", 20),
    "pull_range(91..110)": lambda service: service.pull_range(CONV, "bob", 91, 110),
    "pull of one seq": lambda service: service.pull(CONV, "bob", [245]),
}


def count_results(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, count the CursorResults SQLAlchemy builds, in the returned list."""
    built = [0]
    init = CursorResult.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(CursorResult, "__init__", counted)
    return built


def ingested(service: MessageService) -> MessageService:
    service.ingest(CONV, messages(1, 250))
    service.delete_for_me(CONV, [95, 245], "bob")
    service.mark_read(CONV, [100], "carol")
    return service


@pytest.mark.parametrize("pull", PREPARED.values(), ids=PREPARED.keys())
def test_a_latest_or_range_pull_builds_no_sqlalchemy_result(
    service: MessageService, pull: Pull, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingested(service)
    pull(service)  # warms lazy engine setup
    built = count_results(monkeypatch)
    assert len(pull(service)) in (1, 20)
    assert built == [0]


def test_a_pull_of_scattered_seqs_still_reads_through_sqlalchemy(
    service: MessageService, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingested(service)
    built = count_results(monkeypatch)
    assert len(service.pull(CONV, "bob", [3, 7, 120, 250])) == 4
    assert built == [1]


def test_a_scan_page_is_two_statements(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 30))
    service.delete_for_me(CONV, [7], "bob")
    with EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
        first = service.store.scan(None, 10)
        second = service.store.scan(first.cursor, 10)
    # Per page the message rows and the tag rows after the cursor: no key read before them.
    assert (trips.total, trips.writes) == (4, 0), trips.statements
    assert [s.seq for s in (*first.slots, *second.slots)] == list(range(1, 21))
