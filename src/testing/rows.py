"""The rows the contract suite runs on: a backend configuration and the capabilities it has.

The suite's conftest (``tests/contract/conftest.py``, shipped as ``imbucket.testing.suite``)
declares imbucket's own table of rows and hands it to :func:`use`; under ``pytest
--imbucket-backend NAME`` the one row of the run replaces it. A test that needs a capability
runs on the rows having it::

    @pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

Config = dict[str, Any]

PERSISTENT = "persistent"  # a second open_service on the same config sees the same data
SQL = "sql"  # the store exposes its SQLAlchemy ``engine`` (round trips can be counted)
BUCKETS = "buckets"  # the store is a BucketMessageStore: its ``repository`` can be tested
ROW_LAYOUT = "rows"  # the store is a RowMessageStore: its ``repository`` can be tested
# Not a feature but a cost: every round trip is several times a single local server's (a
# replicated cluster, a remote engine). The heaviest tests (model-based, hostile input, the
# hot-group deleters) run SLOW_SHARE-th of their examples there, read through ``examples``.
SLOW = "slow"
CAPABILITIES = (PERSISTENT, SQL, BUCKETS, ROW_LAYOUT, SLOW)
SLOW_SHARE = 4


@dataclass(frozen=True)
class Row:
    """One backend configuration the contract suite runs on."""

    id: str
    fixture: str  # the name of a fixture returning the open_service config
    capabilities: frozenset[str] = frozenset()


_rows: list[Row] = []  # set by the suite's conftest before any test module is imported


def use(rows: Sequence[Row]) -> None:
    """Make rows the backend table of this pytest run."""
    _rows[:] = rows


def backends(*capabilities: str) -> list[Any]:
    """The rows having every one of capabilities, as parameters of ``backend_config``."""
    return [
        pytest.param(row.fixture, id=row.id)
        for row in _rows
        if row.capabilities.issuperset(capabilities)
    ]


# A config key the suite's ``open_backend`` reads (and removes): the row runs on imbucket.aio.
ASYNC_API = "imbucket.aio"


def on_asyncio(config: Config) -> Config:
    """Config for a row that runs the same tests on the asyncio API (``imbucket.testing.aio``)."""
    return {**config, ASYNC_API: True}


def row_of(fixture: str) -> Row:
    """The row of this run whose config fixture is named fixture."""
    return next(row for row in _rows if row.fixture == fixture)


def examples(count: int, capabilities: frozenset[str]) -> int:
    """How many of a heavy test's count examples a row with capabilities runs.

    All of them, or on a SLOW row a SLOW_SHARE-th (at least one).
    """
    return max(1, count // SLOW_SHARE) if SLOW in capabilities else count


def store_config(backend: str, url: str = "") -> Config:
    """An uncached store configuration."""
    return {"store": {"backend": backend, "url": url}, "cache": {"backend": "none"}}
