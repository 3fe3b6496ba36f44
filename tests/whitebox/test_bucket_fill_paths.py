"""A fill of free bucket slots on SQLite and MariaDB: one statement text whichever the slots.

The slots' JSON paths are bound parameters there, so an engine prepares the fill of one
message (and of n messages) once, not once per slot index of a bucket: a hot group's sends
into slots 0..99 would otherwise each run a statement the engine had never seen.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imbucket import MessageView
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.testing.factories import draft
from tests.whitebox.test_migrate_bulk import _target


@pytest.mark.parametrize("engine", ["sqlite", "mariadb"])
def test_sends_into_every_slot_of_a_bucket_run_one_fill_statement(
    engine: str, tmp_path: Path
) -> None:
    with _target(engine, "bucket", tmp_path) as service:
        service.send("sg_hot", [draft(0)])  # the bucket exists: the sends below fill it
        with EngineStatements(service.store.engine) as trips:  # type: ignore[attr-defined]
            sent = [service.send("sg_hot", [draft(n)])[0].seq for n in range(1, 60)]
        fills = {s for s in trips.statements if "imb_bucket_docs" in s and "msgs" in s}
        assert sent == list(range(2, 61))
        assert len(fills) == 1, fills
        pulled = service.pull_range("sg_hot", "bob", 1, 60)
        assert all(isinstance(entry, MessageView) for entry in pulled)
