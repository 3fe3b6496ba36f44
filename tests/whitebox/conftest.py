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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The white-box suites count what the sync stores do: the asyncio rows run the same
    stores (tests/unit/test_aio.py), so they are left to the contract suite."""
    kept = [item for item in items if not _on_asyncio(item)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if _on_asyncio(item)])
        items[:] = kept


def _on_asyncio(item: pytest.Item) -> bool:
    """Whether item is a white-box test on an asyncio row (its config fixture is aio_…)."""
    callspec = getattr(item, "callspec", None)
    fixture = str(callspec.params.get("backend_config", "")) if callspec else ""
    return "tests/whitebox" in str(item.path) and fixture.startswith("aio_")
