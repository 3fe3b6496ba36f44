"""imbucket's contract suite as a pytest plugin, for backends written outside this project.

The suite's home is ``tests/contract`` of imbucket's source tree; the wheel ships it as the
subpackage ``imbucket.testing.suite`` (``[tool.setuptools]`` in pyproject.toml), next to the
helpers it imports (``factories``, ``reference``, ``dump``, ``strategies``, ``concurrency``,
``migration_data``), its row table (``rows``), and the histories kit (``histories``,
``history_check``: concurrent clients under a fault, checked against ``reference``).
``pytest --imbucket-backend NAME`` (the plugin in ``imbucket.testing.plugin`` is registered
under pytest's ``pytest11`` entry point group, so it loads wherever imbucket is installed)
runs that suite on the store backend NAME alone: a built-in one or an ``imbucket.backends``
entry point (docs/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from imbucket.testing.rows import Config, store_config


@dataclass(frozen=True, slots=True)
class SelectedBackend:
    """The backend named on the command line, and the capabilities its row claims."""

    name: str
    url: str = ""
    capabilities: frozenset[str] = frozenset()

    def config(self) -> Config:
        """The open_service configuration of the row (no cache in front)."""
        return store_config(self.name, self.url)


_selected: list[SelectedBackend] = []  # set once per pytest run, before the suite is imported


def select(backend: SelectedBackend) -> None:
    """Make backend the one row of this run's contract suite."""
    _selected[:] = [backend]


def selected() -> SelectedBackend | None:
    """The backend chosen with ``--imbucket-backend``, or None for the built-in table."""
    return _selected[0] if _selected else None


def suite_dir() -> Path:
    """The contract suite's directory, wherever the installed imbucket keeps it.

    From a wheel, ``imbucket.testing/suite`` in site-packages; from an editable install of a
    checkout, the checkout's ``tests/contract``.
    """
    spec = find_spec("imbucket.testing.suite")
    if spec is None or spec.origin is None:  # pragma: no cover - a broken installation
        raise ModuleNotFoundError("imbucket.testing.suite is not installed with imbucket")
    return Path(spec.origin).parent
