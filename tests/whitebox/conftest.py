"""White-box suites: they reach into a backend (its repository, its engine, its round trips).

They run on the same backend rows as the black-box contract suite in ``tests/contract``:
its row fixtures are imported here, so the two never drift apart.
"""

from collections.abc import Iterator

import pytest

from imbucket.app.service import MessageService
from imbucket.bench.instrument.probe import Probe, probing
from imbucket.testing.rows import Config
from tests.contract.conftest import *  # noqa: F403  (the backend rows and their fixtures)


@pytest.fixture
def probed(backend_config: Config) -> Iterator[tuple[Probe, MessageService]]:
    """A service opened while round trips are being counted (pymongo needs that order)."""
    with probing() as probe:
        service = probe.open_service(backend_config)
        try:
            yield probe, service
        finally:
            service.close()
