"""Migrate between every ordered pair of persistent backend rows, re-bucketing on the way.

The source keeps one deleter inline per slot, so bucket sources hold spilled deleters;
targets that are bucket stores take turns at bucket sizes 100, 37 and 500.
"""

from __future__ import annotations

from contextlib import ExitStack
from itertools import permutations
from pathlib import Path

import pytest

from imbucket.app import open_service
from imbucket.app.migrate import migrate, verify
from imbucket.testing.migration_data import fill, views
from tests.migrate.endpoints import ROWS, config

SIZES = (100, 37, 500)


def _pairs() -> list[object]:
    params = []
    for n, (source, target) in enumerate(permutations(ROWS, 2)):
        size = SIZES[n % len(SIZES)] if "bucket" in target else 100
        params.append(pytest.param(source, target, size, id=f"{source}->{target}@{size}"))
    return params


@pytest.mark.parametrize(("source", "target", "size"), _pairs())
def test_migrate_copies_everything_and_a_second_run_changes_nothing(
    source: str, target: str, size: int, tmp_path: Path
) -> None:
    with ExitStack() as stack:
        src = stack.enter_context(
            open_service(config(source, stack, tmp_path, max_deleters_per_slot=1))
        )
        dst = stack.enter_context(open_service(config(target, stack, tmp_path, size)))
        fill(src)

        copied = migrate(src, dst, batch=64)
        assert copied.differences == 0
        assert copied.written == copied.slots
        assert copied.messages == src.stats().messages
        assert verify(src, dst, batch=64).differences == 0
        assert views(dst) == views(src)

        again = migrate(src, dst, batch=64)
        assert (again.written, again.differences, again.slots) == (0, 0, copied.slots)
        assert dst.store.layout.size == size
