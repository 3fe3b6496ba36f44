"""Every mutation of a cached seq shows on the very next pull: warm -> mutate -> pull."""

from __future__ import annotations

import pytest

from imbucket.domain.projection import Entry, MessageView, TombstoneReason
from tests.cache.cases import CONV, MUTATIONS, OWNER, Mutation, chat, seed, tombstone
from tests.cache.conftest import Rig


def warm(rig: Rig) -> list[Entry]:
    """Fill the cache with seqs 1..6 and check the next pull is served from it."""
    seed(rig.service)
    entries = rig.service.pull_latest(CONV, "bob")
    rig.spy.reads.clear()
    assert rig.service.pull_latest(CONV, "bob") == entries
    assert rig.spy.reads == []
    return entries


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_a_mutation_of_a_cached_seq_shows_on_the_next_pull(mutation: Mutation, rig: Rig) -> None:
    before = warm(rig)
    assert rig.cached(CONV, mutation.seq) is not None
    assert not mutation.shows(before[mutation.seq - 1])

    mutation.apply(rig.service)
    assert rig.cached(CONV, mutation.seq) is None

    rig.spy.reads.clear()
    after = rig.service.pull_latest(CONV, "bob")
    assert mutation.shows(after[mutation.seq - 1])
    assert [e for e in after if e.seq != mutation.seq] == [
        e for e in before if e.seq != mutation.seq
    ]
    assert rig.spy.reads == [[mutation.seq]]  # only the invalidated seq came from the store

    rig.spy.reads.clear()
    assert rig.service.pull_latest(CONV, "bob") == after
    assert rig.spy.reads == []  # the new state is cached again
    assert rig.raw.ttl(rig.cache.slot_key(CONV, mutation.seq)) > 0


def test_a_no_op_mutation_leaves_the_cache_alone(rig: Rig) -> None:
    warm(rig)
    generation = rig.raw.get(rig.cache.generation_key(CONV))
    assert rig.service.ingest(CONV, chat(1, 5)).duplicates == (1, 2, 3, 4, 5)
    assert rig.service.delete_for_me(CONV, [6], "carol") == 0
    assert rig.raw.get(rig.cache.generation_key(CONV)) == generation
    rig.spy.reads.clear()
    rig.service.pull_latest(CONV, "bob")
    assert rig.spy.reads == []


@pytest.mark.parametrize("clear", ["clear_history", "clear_for_everyone"])
def test_clears_apply_to_cached_slots_through_the_watermarks(clear: str, rig: Rig) -> None:
    warm(rig)
    if clear == "clear_history":
        rig.service.clear_history(CONV, "bob")
    else:
        rig.service.clear_for_everyone(CONV, OWNER)
    entries = rig.service.pull(CONV, "bob", list(range(1, 7)))
    assert all(tombstone(TombstoneReason.CLEARED)(e) for e in entries)


def test_a_seq_with_nothing_stored_is_never_cached(rig: Rig) -> None:
    rig.service.ingest(CONV, chat(1, 2))
    rig.service.seqs.raise_max_seq(CONV, 4)  # 3 and 4 allocated, nothing stored yet
    missing = tombstone(TombstoneReason.MISSING)
    for _ in range(2):
        entries = rig.service.pull_latest(CONV, "bob")
        assert [missing(e) for e in entries] == [False, False, True, True]
    assert rig.cached(CONV, 3) is None and rig.cached(CONV, 4) is None
    assert rig.spy.reads[-1] == [3, 4]  # the holes are asked of the store every time
    rig.service.ingest(CONV, chat(3, 4))
    assert all(isinstance(e, MessageView) for e in rig.service.pull_latest(CONV, "bob"))
