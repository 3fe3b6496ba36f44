"""Each store's invalidation log: what a writer appends, every reader reads back in order, from
another open of the same store, and what is removed is gone (ports.invalidation_log)."""

from __future__ import annotations

import pytest

from imbucket.app import open_container
from imbucket.domain.invalidation import Invalidation
from imbucket.testing.rows import Config

ENTRIES = [
    Invalidation("sg_a", seqs=(1, 2, 300)),
    Invalidation("sg_b", watermarks=True),
    Invalidation("sg_a", floors=("bob", "carol")),
]


def test_the_log_keeps_entries_in_order_until_removed(backend_config: Config) -> None:
    container = open_container(backend_config)
    backend = container.backend()
    log = backend.invalidation_log
    assert log is not None
    try:
        assert log.read(10) == []
        for at, entry in enumerate(ENTRIES):
            log.append(entry, 1_700_000_000.5 + at)
        found = log.read(10)
        assert [logged.invalidation for logged in found] == ENTRIES
        assert [logged.written_at for logged in found] == [1_700_000_000.5 + at for at in range(3)]
        assert [logged.invalidation for logged in log.read(2)] == ENTRIES[:2]
        log.remove([found[0].key, found[2].key])
        log.remove([found[0].key])  # gone already: ignored
        assert [logged.invalidation for logged in log.read(10)] == [ENTRIES[1]]
    finally:
        backend.store.close()
        backend.seqs.close()


@pytest.mark.parametrize("text", ["[]", '{"s": ["x"]}', '{"f": [1]}', "not json"])
def test_an_entry_this_code_did_not_write_names_nothing(text: str) -> None:
    from imbucket.domain.invalidation import decoded

    assert decoded("sg_a", text) == Invalidation("sg_a")
