"""Tag writes: round trips of revoke, delete_for_me, mark_read and purge, pinned per row.

Counted at the drivers (the memory engine by repository calls), the Redis cache's own
invalidation left out: counts, never times. Issue 13 goal 5 asks for at most 2 (the
permission read when one is needed, and one conditional write); where a write pays more, the
pin says how much and docs/buckets.md says why.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app import MessageService
from app.instrument.probe import Probe
from domain.model import Actor, Role
from imbucket_contract.factories import CONV, messages
from tests.contract.conftest import Config

CACHE = "redis"
OWNER = Actor("olivia", Role.OWNER)

# Each on a seq of its own, all holding a message sent by alice.
TAG_WRITES: dict[str, Callable[[MessageService], object]] = {
    "revoke": lambda service: service.revoke(CONV, 5, Actor("alice")),
    "delete_for_me": lambda service: service.delete_for_me(CONV, [6], "bob"),
    "mark_read": lambda service: service.mark_read(CONV, [7], "bob"),
    "purge": lambda service: service.purge(CONV, [8], OWNER),
}

# Beyond 2, by row and operation (docs/buckets.md, "Round trips of a tag write"):
# mark_read also raises the reader's read seq in the seq store, a write of its own, which
# MariaDB (no RETURNING on an upsert) reads back; sql-row's purge writes the purged row in
# two statements (create it if missing, wipe it) and drops its deleter and reader rows.
MARK_READ = 3
MARIADB_READ_BACK = 1
SQL_ROW_PURGE = 5


def expected(backend_config: Config, operation: str) -> int:
    """The pinned round trips of operation on this row."""
    store = backend_config["store"]
    if operation == "mark_read":
        return MARK_READ + (MARIADB_READ_BACK if store["url"].startswith("mysql") else 0)
    if operation == "purge" and store["backend"] == "sql-row":
        return SQL_ROW_PURGE
    return 2


@pytest.mark.parametrize("operation", TAG_WRITES)
def test_a_tag_write_on_a_stored_message_costs_its_pinned_round_trips(
    probed: tuple[Probe, MessageService], backend_config: Config, operation: str
) -> None:
    probe, service = probed
    service.ingest(CONV, messages(1, 10))
    count = probe.count(lambda: TAG_WRITES[operation](service)).without(CACHE)
    assert count.total == expected(backend_config, operation), count
    assert count.writes >= 1, count
    # and it was applied: a repeat changes nothing
    assert TAG_WRITES[operation](service) in (False, 0)


def test_a_tag_write_on_an_empty_seq_adds_the_allocation_check(
    probed: tuple[Probe, MessageService],
) -> None:
    """Nothing stored yet: the seq's allocation is checked (max_seq), one more read.

    (A bucket store then also creates the bucket: a second write.)
    """
    probe, service = probed
    service.ingest(CONV, messages(1, 2))
    service.seqs.raise_max_seq(CONV, 10)
    count = probe.count(lambda: service.delete_for_me(CONV, [3], "bob")).without(CACHE)
    assert count.reads == 2, count
    assert count.writes == 1, count
