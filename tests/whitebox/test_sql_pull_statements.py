"""Every pull is one SQL statement: the viewer's watermarks travel with the slots.

Counted at the engine (``EngineStatements``), on every SQL engine and layout: pull_latest,
pull_range and pull of scattered seqs, across a bucket boundary, in an empty conversation
and after a clear, and when a slot read has spilled deleters: the viewer's own side-table
entry is probed in the same statement.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.app import MessageService
from imbucket.bench.instrument import received
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.model import Actor, Role, Slot
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import BUCKETS, SQL, backends

Pull = Callable[[MessageService, str], list[object]]
PULLS: dict[str, Pull] = {
    "pull_latest(20)": lambda service, conv: list(service.pull_latest(conv, "bob", 20)),
    "pull_latest(150)": lambda service, conv: list(service.pull_latest(conv, "bob", 150)),
    "pull_range(91..110)": lambda service, conv: list(service.pull_range(conv, "bob", 91, 110)),
    "pull scattered": lambda service, conv: list(service.pull(conv, "bob", [3, 7, 120, 250])),
}


def statements(service: MessageService) -> EngineStatements:
    return EngineStatements(service.store.engine)  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend_config", backends(SQL), indirect=True)
@pytest.mark.parametrize("pull", PULLS.values(), ids=PULLS.keys())
def test_every_pull_is_one_statement(service: MessageService, pull: Pull) -> None:
    service.ingest(CONV, messages(1, 250))
    service.delete_for_me(CONV, [7, 245], "bob")
    service.delete_for_me(CONV, [3, 246], "carol")
    service.clear_history("sg_cleared", "bob")  # a floor above max_seq
    for conversation in (CONV, "sg_empty", "sg_cleared"):
        with statements(service) as trips:
            pull(service, conversation)
        assert (trips.total, trips.writes) == (1, 0), (conversation, trips.statements)


@pytest.mark.parametrize("backend_config", backends(SQL), indirect=True)
def test_each_viewer_sees_its_own_deletions_after_the_engine_rewrote_the_bucket(
    service: MessageService,
) -> None:
    """Slots rewritten by the engine's own JSON functions (tag writes, in its spacing) show
    each viewer its own deletions and nobody else's, in every pull (SQL rows only: MariaDB's
    openim encoding has no contract row)."""
    service.ingest(CONV, messages(1, 30))
    service.delete_for_me(CONV, [4, 5], "bob")
    service.delete_for_me(CONV, [5, 6], "carol")
    service.revoke(CONV, 9, Actor("admin", Role.APP_ADMIN))  # rewrites the bucket again
    deleted = {"bob": {4, 5}, "carol": {5, 6}, "dave": set()}
    for viewer, seqs in deleted.items():
        for entries in (
            service.pull_latest(CONV, viewer, 30),
            service.pull_range(CONV, viewer, 1, 30),
            service.pull(CONV, viewer, list(range(1, 31))),
        ):
            gone = {
                e.seq
                for e in entries
                if isinstance(e, Tombstone) and e.reason == TombstoneReason.DELETED
            }
            shown = {e.seq for e in entries if isinstance(e, MessageView)}
            assert gone == seqs, (viewer, entries)
            assert shown == set(range(1, 31)) - seqs, viewer


@pytest.mark.parametrize("backend_config", backends(SQL, BUCKETS), indirect=True)
def test_a_spilled_slot_is_settled_in_the_same_statement_for_every_viewer(
    service: MessageService,
) -> None:
    store = service.store
    assert isinstance(store, BucketMessageStore)
    layout, repository = store.layout, store.repository
    stored = messages(1, 4)
    slots = {layout.slot_index(m.seq): Slot(message=m) for m in stored}
    # Seq 2: "inline" among the inline deleters, "spilled" in the side table. Seq 3: flagged
    # with no inline deleter at all (the bucket's budget was spent elsewhere), "spilled" too.
    slots[layout.slot_index(2)] = Slot(
        message=stored[1], deleted_by=frozenset({"inline"}), spilled=True
    )
    slots[layout.slot_index(3)] = Slot(message=stored[2], spilled=True)
    doc_id = layout.doc_id(CONV, 2)
    assert repository.create_bucket(doc_id, slots)
    repository.add_spilled([(doc_id, layout.slot_index(s), "spilled") for s in (2, 3)])
    service.seqs.raise_max_seq(CONV, 4)
    expected = {"inline": (True, False), "spilled": (True, True), "stranger": (False, False)}
    for viewer, deleted in expected.items():
        for pull in (
            lambda v=viewer: service.pull(CONV, v, [2, 3]),
            lambda v=viewer: service.pull_range(CONV, v, 1, 4)[1:3],
            lambda v=viewer: service.pull_latest(CONV, v, 3)[:2],
        ):
            with statements(service) as trips:
                entries = pull()
            assert trips.total == 1, (viewer, trips.statements)
            gone = tuple(
                isinstance(e, Tombstone) and e.reason == TombstoneReason.DELETED for e in entries
            )
            assert gone == deleted, (viewer, entries)
        with statements(service) as trips:  # seq 1 is not flagged: one statement for anyone
            (entry,) = service.pull(CONV, viewer, [1])
        assert trips.total == 1 and isinstance(entry, MessageView), (viewer, trips.statements)


@pytest.mark.parametrize("backend_config", backends(SQL, BUCKETS), indirect=True)
def test_a_pull_receives_each_touched_bucket_once_and_a_sparse_pull_only_its_slots(
    service: MessageService,
) -> None:
    """pull_range across a bucket boundary receives the two buckets' JSON once each (the
    engine does no per-slot work); scattered seqs one to a bucket receive those slots alone."""
    store = service.store
    assert isinstance(store, BucketMessageStore)
    service.ingest(CONV, messages(1, 300))
    layout, repository = store.layout, store.repository
    sizes = {
        index: repository.bucket_bytes(layout.doc_id_for_index(CONV, index)) for index in range(3)
    }
    with received.counting() as ranged:
        assert len(service.pull_range(CONV, "bob", 51, 150)) == 100
    both = sizes[0] + sizes[1]  # type: ignore[operator]
    assert both <= ranged.total() <= both + 2_000, (ranged.total(), sizes)
    with received.counting() as scattered:
        assert len(service.pull(CONV, "bob", [5, 105, 205])) == 3
    assert scattered.total() < min(sizes.values()) / 5, (scattered.total(), sizes)  # type: ignore[type-var]


@pytest.mark.parametrize("backend_config", backends(SQL, BUCKETS), indirect=True)
def test_a_sparse_pull_cuts_each_listed_slot_out_of_its_bucket_once(
    service: MessageService,
) -> None:
    """PostgreSQL detoasts and MariaDB parses a whole bucket on every JSON call on it: the
    pull of scattered seqs names the bucket column once (each slot is cut out once, and the
    viewer's view of it is computed on the slot alone). SQLite keeps a statement's parsed
    JSON, so it may name it as often as it likes."""
    service.ingest(CONV, messages(1, 300))
    service.delete_for_me(CONV, [5, 205], "bob")
    service.delete_for_me(CONV, [205], "carol")
    with statements(service) as trips:
        pulled = service.pull(CONV, "bob", [5, 105, 205])
    assert [type(entry) for entry in pulled] == [Tombstone, MessageView, Tombstone]
    (statement,) = trips.statements
    named = statement.count("msgs") - statement.count("AS msgs")
    kind = service.store.engine.dialect.name  # type: ignore[attr-defined]
    assert named == 1 or kind == "sqlite", statement
