"""White-box suites: they reach into a backend (its repository, its engine, its round trips).

They run on the same backend rows as the black-box contract suite in ``tests/contract``:
its row fixtures are imported here, so the two never drift apart.
"""

from tests.contract.conftest import *  # noqa: F403  (the backend rows and their fixtures)
