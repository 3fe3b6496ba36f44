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
CAPABILITIES = (PERSISTENT, SQL, BUCKETS, ROW_LAYOUT)


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


def store_config(backend: str, url: str = "") -> Config:
    """An uncached store configuration."""
    return {"store": {"backend": backend, "url": url}, "cache": {"backend": "none"}}
