"""Stores that outlive a service: re-opening, the recorded layout, writers on own connections."""

from __future__ import annotations

import random
from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.domain.errors import LayoutMismatch
from imbucket.testing.concurrency import WRITERS, run_together
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import PERSISTENT, Config, backends

pytestmark = pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)


def test_reopening_finds_the_stored_messages(open_backend: Any) -> None:
    open_backend().ingest(CONV, messages(1, 3))
    again: MessageService = open_backend()
    assert again.max_seq(CONV) == 3
    assert sorted(again.store.get(CONV, [1, 2, 3, 4])) == [1, 2, 3]


def test_reopening_with_another_bucket_size_is_refused(
    open_backend: Any, backend_config: Config
) -> None:
    open_backend().ingest(CONV, messages(1, 3))
    with pytest.raises(LayoutMismatch):
        open_backend(store={**backend_config["store"], "bucket_size": 50})
    assert open_backend().stats().messages == 3


def test_writers_on_their_own_connections_store_each_message_once(open_backend: Any) -> None:
    services: list[MessageService] = [open_backend() for _ in range(WRITERS)]
    wanted = messages(1, 250, "sg_own_connections")

    def write(index: int) -> tuple[list[int], list[int]]:
        service, rng = services[index], random.Random(index)
        inserted: list[int] = []
        for _ in range(3):
            start = rng.randrange(0, 200)
            inserted += service.ingest("sg_own_connections", wanted[start : start + 60]).inserted
        inserted += service.ingest("sg_own_connections", wanted).inserted
        allocated = [service.seqs.allocate(CONV, 2) for _ in range(10)]
        return inserted, allocated

    results = run_together(WRITERS, write)
    inserted = sorted(seq for batch, _ in results for seq in batch)
    firsts = sorted(first for _, batch in results for first in batch)
    assert inserted == list(range(1, 251))
    assert firsts == list(range(1, 2 * WRITERS * 10, 2))
    assert services[0].stats().messages == 250
