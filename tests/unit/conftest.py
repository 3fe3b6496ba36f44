"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imbucket.adapters.sql.engine import Database


@pytest.fixture
def db() -> Iterator[Database]:
    """A Database on an in-memory SQLite (test modules may define their own ``db``)."""
    database = Database("sqlite://")
    yield database
    database.close()
