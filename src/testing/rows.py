"""The rows the contract suite runs on: a backend configuration and the capabilities it has.

The suite's conftest (``tests/contract/conftest.py``, shipped as ``imbucket.testing.suite``)
declares imbucket's own table of rows and hands it to :func:`use`; under ``pytest
--imbucket-backend NAME`` the one row of the run replaces it. A test that needs a capability
runs on the rows having it::

    @pytest.mark.parametrize("backend_config", backends(PERSISTENT), indirect=True)

or, composing with any parametrization, carries the marker ``@needs(SEND_CLAIMS)``: the
suite's conftest deselects it on the rows lacking one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
SLOW_SHARE = 4
# Guarantees every imbucket layout keeps and OpenIM's own (openim-mongo, docs/openim.md) cannot:
SEND_CLAIMS = "send-claims"  # a send is idempotent per client_msg_id (claims kept, pruned)
EARLY_TAGS = "early-tags"  # a mark-read of a seq not stored yet is kept for the message
SPILL = "spill"  # deleters beyond the inline budget are kept (spilled), none refused
INT64_FIELDS = "int64-fields"  # every integer message field holds any int64
GUARANTEES = frozenset({SEND_CLAIMS, EARLY_TAGS, SPILL, INT64_FIELDS})
CAPABILITIES = (PERSISTENT, SQL, BUCKETS, ROW_LAYOUT, SLOW, *sorted(GUARANTEES))


@dataclass(frozen=True)
class Row:
    """One backend configuration the contract suite runs on."""

    id: str
    fixture: str  # the name of a fixture returning the open_service config
    capabilities: frozenset[str] = frozenset()


def having(*capabilities: str) -> frozenset[str]:
    """Capabilities plus every guarantee of imbucket's own layouts (GUARANTEES)."""
    return GUARANTEES.union(capabilities)


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


NEEDS = "needs"  # the marker ``needs`` sets


def needs(*capabilities: str) -> pytest.MarkDecorator:
    """Mark a test (class, or module as ``pytestmark``) to run only on rows having capabilities."""
    marker: pytest.MarkDecorator = getattr(pytest.mark, NEEDS)
    return marker(*capabilities)


def runs_on(fixture: str, needed: Iterable[str]) -> bool:
    """Whether the row whose config fixture is fixture has every capability needed."""
    return any(row.fixture == fixture and row.capabilities.issuperset(needed) for row in _rows)


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
