"""Session-wide test setup: containers started on demand are stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import close_containers


@pytest.fixture(scope="session", autouse=True)
def _stop_containers() -> Iterator[None]:
    yield from close_containers()
