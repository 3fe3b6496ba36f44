"""imbucket's contract suite as a pytest plugin, for backends written outside this project.

``pytest --imbucket-backend NAME`` (the plugin in ``imbucket_contract.plugin`` is registered
under pytest's ``pytest11`` entry point group, so it loads wherever imbucket is installed) runs
the contract suite of ``tests/contract`` on the store backend NAME alone: a built-in one or an
``imbucket.backends`` entry point (docs/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CAPABILITIES = ("persistent", "sql", "buckets")  # as tests/contract/conftest.py names them


@dataclass(frozen=True, slots=True)
class SelectedBackend:
    """The backend named on the command line, and the capabilities its row claims."""

    name: str
    url: str = ""
    capabilities: frozenset[str] = frozenset()

    def config(self) -> dict[str, object]:
        """The open_service configuration of the row (no cache in front)."""
        return {"store": {"backend": self.name, "url": self.url}, "cache": {"backend": "none"}}


_selected: list[SelectedBackend] = []  # set once per pytest run, before the suite is imported


def select(backend: SelectedBackend) -> None:
    """Make backend the one row of this run's contract suite."""
    _selected[:] = [backend]


def selected() -> SelectedBackend | None:
    """The backend chosen with ``--imbucket-backend``, or None for the built-in table."""
    return _selected[0] if _selected else None


def suite_dir() -> Path | None:
    """The contract suite's directory (``tests/contract`` of the checkout imbucket runs from).

    None when imbucket was installed from a wheel, which does not carry the test tree.
    """
    suite = Path(__file__).resolve().parents[2] / "tests" / "contract"
    return suite if (suite / "conftest.py").is_file() else None
