"""Round trips of the cached store, counted: Redis commands sent and store data reads."""

from __future__ import annotations

from tests.cache.cases import CONV, chat
from tests.cache.conftest import Rig, commands


def start(rig: Rig) -> None:
    """50 messages stored; the Lua scripts loaded; counters at zero."""
    rig.service.ingest(CONV, chat(1, 50))
    rig.service.pull(CONV, "bob", [1])  # loads the fill script on the server
    rig.service.mark_read(CONV, [1], "bob")  # loads the invalidation script
    zero(rig)


def zero(rig: Rig) -> None:
    rig.spy.reads.clear()
    commands(rig.cache).clear()


def test_a_fully_cached_pull_latest_is_one_lookup_and_no_store_read(rig: Rig) -> None:
    start(rig)
    first = rig.service.pull_latest(CONV, "bob", 20)
    zero(rig)

    entries = rig.service.pull_latest(CONV, "bob", 20)
    assert entries == first
    assert [e.seq for e in entries] == list(range(31, 51))
    assert rig.spy.reads == []
    assert commands(rig.cache) == [rig.target.lookup]


def test_a_cold_pull_sends_one_lookup_one_fill_and_reads_the_store_once(rig: Rig) -> None:
    start(rig)
    rig.service.pull(CONV, "bob", [35, 36])  # partly warm
    zero(rig)

    rig.service.pull_latest(CONV, "bob", 20)
    assert rig.spy.reads == [[s for s in range(31, 51) if s not in (35, 36)]]
    assert commands(rig.cache) == [rig.target.lookup, "EVALSHA"]


def test_a_mutation_sends_one_invalidation_and_a_no_op_sends_nothing(rig: Rig) -> None:
    start(rig)
    rig.service.delete_for_me(CONV, list(range(1, 21)), "bob")
    assert commands(rig.cache) == ["EVALSHA"]
    commands(rig.cache).clear()
    rig.service.ingest(CONV, chat(1, 50))  # redelivery changes nothing
    rig.service.delete_for_me(CONV, list(range(1, 21)), "bob")
    assert commands(rig.cache) == []
    assert rig.spy.reads == []


def test_a_cached_pull_of_a_thousand_seqs_is_still_one_lookup(rig: Rig) -> None:
    rig.service.ingest(CONV, chat(1, 1000))
    first = rig.service.pull_range(CONV, "bob", 1, 1000)
    zero(rig)
    assert rig.service.pull_range(CONV, "bob", 1, 1000) == first
    assert rig.spy.reads == []
    assert commands(rig.cache) == [rig.target.lookup]


def test_a_deleted_seq_is_cached_without_its_deleters_and_answered_per_viewer(rig: Rig) -> None:
    start(rig)
    for user in ("carol", "dave", "erin"):
        rig.service.delete_for_me(CONV, [7], user)
    for viewer in ("carol", "bob"):  # a deleter and a bystander fill their own marks
        rig.service.pull(CONV, viewer, [7, 8])
    zero(rig)

    deleter, bystander = (
        rig.service.pull(CONV, "carol", [7])[0],
        rig.service.pull(CONV, "bob", [7])[0],
    )
    assert (type(deleter).__name__, type(bystander).__name__) == ("Tombstone", "MessageView")
    assert rig.spy.reads == []
    assert commands(rig.cache) == [rig.target.lookup] * 2
    entry = rig.raw.get(rig.cache.slot_key(CONV, 7))
    assert entry is not None and b"carol" not in entry and b"dave" not in entry

    rig.service.pull(CONV, "dave", [7])  # no mark yet: the store answers for dave alone
    assert rig.spy.reads == [[7]]
    rig.service.delete_for_me(CONV, [7], "bob")  # every mark of seq 7 is void now
    zero(rig)
    assert type(rig.service.pull(CONV, "bob", [7])[0]).__name__ == "Tombstone"
    assert rig.spy.reads == [[7]]
