"""White-box suites: they reach into a backend (its repository, its engine, its round trips).

They run on the same backend rows as the black-box contract suite in ``tests/contract``:
its row fixtures are imported here, so the two never drift apart.
"""

from collections.abc import Iterator

import pytest

from imbucket.app.service import MessageService
from imbucket.bench.instrument.probe import Probe, probing
from imbucket.testing.rows import GUARANTEES, Config, row_of
from tests.contract.conftest import *  # noqa: F403  (the backend rows and their fixtures)

WARM_UP = "whitebox-warm-up"


@pytest.fixture
def probed(backend_config: Config) -> Iterator[tuple[Probe, MessageService]]:
    """A service opened while round trips are being counted (pymongo needs that order)."""
    config = backend_config
    if config.get("cache", {}).get("backend", "none") != "none":
        # The cache reads the store's invalidation log once per interval: here once, at the
        # warm-up pull of a conversation of its own, so that no pin counts it.
        config = {**config, "cache": {**config["cache"], "staleness_seconds": 3600}}
    with probing() as probe:
        service = probe.open_service(config)
        try:
            service.pull_latest(WARM_UP, "nobody")
            yield probe, service
        finally:
            service.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The white-box suites pin what imbucket's own stores do. The asyncio rows run those same
    stores (tests/unit/test_aio.py) and openim-mongo runs OpenIM's layout, whose costs and
    refusals its own tests pin (tests/integration/test_openim*.py): both are left to the
    contract suite."""
    left = [item for item in items if _elsewhere(item)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if not _elsewhere(item)]


def _elsewhere(item: pytest.Item) -> bool:
    """Whether item is a white-box test on a row these suites leave to the contract suite."""
    callspec = getattr(item, "callspec", None)
    fixture = str(callspec.params.get("backend_config", "")) if callspec else ""
    if "tests/whitebox" not in str(item.path) or not fixture:
        return False
    if fixture.startswith("aio_"):
        return True
    try:
        return not row_of(fixture).capabilities >= GUARANTEES
    except StopIteration:  # a fixture of the test's own, not a row of the table
        return False
