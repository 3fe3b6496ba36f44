"""The hot delete past the inline cap (one statement: flag and side-table row) under faults.

sql-bucket writes the flag and the deleter's side-table row in one statement (a
data-modifying CTE on PostgreSQL, the bucket table's trigger on MariaDB). Broken before it
runs or after it committed, it is sent again and the deleter is stored, and counted, once.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from imbucket.adapters.sql.bucket import SqlBucketStore
from imbucket.domain.model import Slot
from imbucket.testing.factories import messages
from tests.faults.conftest import MODES, STORES, Rig
from tests.faults.scenario import retries

pytestmark = pytest.mark.parametrize(
    "rig", [store for store in STORES if "sql-bucket" in str(store.id)], indirect=True
)
CONV = "sg_spill"
HOT = 6
# The UPDATE carrying the spill: PostgreSQL's CTE, or MariaDB's UPDATE feeding the trigger.
SPILLING = r"^WITH patched AS \(UPDATE|\bspilling = CASE\b"


@pytest.mark.parametrize("mode", MODES)
def test_a_spilling_delete_survives_one_lost_connection(
    rig: Rig, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = rig.service
    store = service.store
    assert isinstance(store, SqlBucketStore)
    repository, layout = store.repository, store.layout
    inline = frozenset(f"user-{n:04d}" for n in range(store.budget.deleters_per_slot))
    slots = {layout.slot_index(m.seq): Slot(message=m) for m in messages(1, 8, CONV)}
    index, doc_id = layout.slot_index(HOT), layout.doc_id(CONV, HOT)
    slots[index] = replace(slots[index], deleted_by=inline)  # at the cap: the next one spills
    assert repository.create_bucket(doc_id, slots)
    service.seqs.raise_max_seq(CONV, 8)
    caplog.clear()
    with rig.faults.armed(mode, match=SPILLING) as faults:
        assert service.delete_for_me(CONV, [HOT], "late") == 1
    assert len(faults.fired) == 1 and retries(caplog) == 1
    assert faults.sent(SPILLING) == 2  # the one statement, sent again
    assert repository.read_spilled({doc_id: [index]}) == {doc_id: {index: {"late"}}}
    (slot,) = repository.read({doc_id: [index]})[doc_id].values()
    assert slot.spilled and slot.deleted_by == inline
    assert service.delete_for_me(CONV, [HOT], "late") == 0
