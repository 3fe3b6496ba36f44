"""The pytest hooks of imbucket.testing: ``--imbucket-backend NAME [--imbucket-url URL]``.

Loaded in every pytest run where imbucket is installed (entry point group ``pytest11``); it
does nothing unless ``--imbucket-backend`` is given, and its fixtures are prefixed ``imbucket_``.
"""

from __future__ import annotations

import pytest

from imbucket.testing import SelectedBackend, select, selected, suite_dir
from imbucket.testing.rows import CAPABILITIES


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options that point the contract suite at one backend."""
    group = parser.getgroup("imbucket", "imbucket contract suite")
    group.addoption(
        "--imbucket-backend",
        metavar="NAME",
        help="run the contract suite on this store backend alone (built-in or entry point)",
    )
    group.addoption("--imbucket-url", default="", metavar="URL", help="its store.url")
    group.addoption(
        "--imbucket-capabilities",
        default="",
        metavar="LIST",
        help=f"comma-separated capabilities the backend has, of: {', '.join(CAPABILITIES)}",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Select the backend before the suite's conftest builds its rows; collect the suite."""
    options = early_config.known_args_namespace
    if not options.imbucket_backend:
        return
    select(_backend(options.imbucket_backend, options.imbucket_url, options.imbucket_capabilities))
    if options.file_or_dir:
        return
    suite = str(suite_dir())
    args.append(suite)
    options.file_or_dir.append(suite)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Which backend the suite runs on, and where the installed suite lives."""
    backend = selected()
    if backend is None:
        return None
    return f"imbucket contract suite: {suite_dir()} on backend {backend.name!r}"


def pytest_configure(config: pytest.Config) -> None:
    """The suite's markers, for runs outside imbucket's checkout (no imbucket ini file there)."""
    config.addinivalue_line("markers", "slow: long-running test")
    # A test's own time budget, honoured where pytest-timeout is installed (imbucket's CI).
    config.addinivalue_line("markers", "timeout(seconds): pytest-timeout's per-test limit")


def _backend(name: str, url: str, capabilities: str) -> SelectedBackend:
    # Imported here: this plugin loads in every pytest run where imbucket is installed.
    from imbucket.app.registry import check_store_backend
    from imbucket.domain.errors import ConfigError

    try:
        check_store_backend(name)
    except ConfigError as error:
        raise pytest.UsageError(str(error)) from None
    claimed = frozenset(part.strip() for part in capabilities.split(",") if part.strip())
    if unknown := claimed - set(CAPABILITIES):
        raise pytest.UsageError(f"unknown capabilities {sorted(unknown)}; known: {CAPABILITIES}")
    return SelectedBackend(name, url, claimed)


@pytest.fixture
def imbucket_selected_config() -> dict[str, object]:
    """The open_service configuration of the backend named by ``--imbucket-backend``."""
    backend = selected()
    if backend is None:
        raise pytest.UsageError("imbucket_selected_config needs --imbucket-backend")
    return backend.config()


@pytest.fixture
def imbucket_emulated_server() -> bool:
    """Whether the row's server is an emulator too slow for the largest tests: no here.

    imbucket's own ``tests/conftest.py`` overrides it for the mongoeco emulator; the model-based
    test and the 5,000-deleter test then run fewer examples.
    """
    return False
