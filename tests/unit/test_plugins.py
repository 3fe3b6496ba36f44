"""Third-party store backends: entry points in ``imbucket.backends``, selected by config."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imbucket.adapters.memory import MemoryBucketRepository
from imbucket.app import open_service, registry
from imbucket.app.cli import cli
from imbucket.app.registry import REGISTRY, BackendRules
from imbucket.app.settings import load_settings
from imbucket.domain.errors import ConfigError
from imbucket.plugin_api import (
    Backend,
    BucketLayout,
    BucketMessageStore,
    MemorySeqStore,
    TagBudget,
    Timeouts,
)
from imbucket.testing import suite_dir
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import CAPABILITIES

opened: list[tuple[str, int]] = []  # (url, bucket size) of each fake_store opened


def fake_store(url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts) -> Backend:
    """A plugin factory: the memory engines, remembering what it was called with."""
    opened.append((url, layout.size))
    return Backend(BucketMessageStore(MemoryBucketRepository(layout), budget), MemorySeqStore())


def not_a_backend(url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts) -> object:
    return "a string"


PLUGINS = {
    "fake-store": f"{__name__}:fake_store",
    "not-a-backend": f"{__name__}:not_a_backend",
    "never-imported": "no_such_module_anywhere:factory",
    "memory": "no_such_module_anywhere:factory",  # a plugin cannot shadow a built-in name
}


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """PLUGINS as if installed packages had registered them."""
    points = [EntryPoint(name, value, registry.PLUGIN_GROUP) for name, value in PLUGINS.items()]

    def entry_points(group: str) -> list[EntryPoint]:
        return [point for point in points if point.group == group]

    monkeypatch.setattr(registry, "entry_points", entry_points)
    opened.clear()


def test_a_plugin_is_selected_by_config_like_a_built_in_backend() -> None:
    config = {"store": {"backend": "fake-store", "url": "fake://here", "bucket_size": 7}}
    with open_service(config) as service:
        service.ingest(CONV, messages(1, 10))
        assert [entry.seq for entry in service.pull_range(CONV, "bob", 1, 10)] == list(range(1, 11))
    assert opened == [("fake://here", 7)]


def test_plugins_are_imported_only_when_selected() -> None:
    with open_service({"store": {"backend": "memory"}}) as service:
        service.ingest(CONV, messages(1, 3))
    with pytest.raises(ConfigError, match=r"'never-imported'.*fails to load.*no_such_module"):
        open_service({"store": {"backend": "never-imported"}})


def test_an_unknown_backend_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings({"store": {"backend": "scylla"}})
    assert "unknown store backend 'scylla'" in str(raised.value)
    for known in ("memory", "sql-row", "mongo-bucket", "fake-store", "never-imported"):
        assert known in str(raised.value)


def test_a_factory_must_return_a_backend() -> None:
    with pytest.raises(ConfigError, match="'not-a-backend' returned str, not Backend"):
        open_service({"store": {"backend": "not-a-backend"}})


def test_a_plugin_named_like_a_built_in_backend_is_ignored() -> None:
    assert "memory" not in REGISTRY.plugins()
    with open_service({"store": {"backend": "memory"}}) as service:
        assert isinstance(service.seqs, MemorySeqStore)


# Bucket settings that cannot fit: one slot's deleter cap is above what a bucket may hold.
UNFIT = {"max_bucket_bytes": 4 * 1024 * 1024}


def test_a_plugin_bucket_store_gets_the_bucket_bounds_check() -> None:
    with pytest.raises(ConfigError, match=r"store\.max_bucket_bytes = 4194304"):
        open_service({"store": {"backend": "fake-store", **UNFIT}})
    assert opened == [("", 100)]  # opened (its layout is known only then), closed, refused
    with open_service({"store": {"backend": "fake-store"}}) as service:
        assert service.max_seq(CONV) == 0


def test_a_new_built_in_backend_is_one_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(REGISTRY, "_builtins", dict(REGISTRY._builtins))
    REGISTRY.register("toy", f"{__name__}:fake_store", BackendRules("buckets", persists=False))
    with pytest.raises(ConfigError, match=r"store\.max_bucket_bytes"):
        load_settings({"store": {"backend": "toy", **UNFIT}})  # checked at load, like memory
    with open_service({"store": {"backend": "toy", "url": "toy://"}}) as service:
        service.ingest(CONV, messages(1, 2))
    assert opened == [("toy://", 100)]
    result = CliRunner().invoke(cli, ["backends"])
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("│")[1:3]] for line in result.output.splitlines()]
    assert ["store", "toy"] in rows


def test_a_backend_refuses_the_bucket_encodings_it_does_not_write_at_settings_load() -> None:
    with pytest.raises(ConfigError, match="mongo-bucket writes the bucket encoding 'openim' only"):
        load_settings({"store": {"backend": "mongo-bucket", "bucket_encoding": "compact"}})
    assert load_settings({"store": {"backend": "mongo-bucket"}}).store.bucket_encoding is None


def test_cli_backends_lists_the_plugins() -> None:
    result = CliRunner().invoke(cli, ["backends"])
    assert result.exit_code == 0, result.output
    assert "store (plugin)" in result.output and "fake-store" in result.output


ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "imbucket-example-store"


def test_the_example_backend_imports_only_the_plugin_api_and_the_public_surface() -> None:
    imported: set[str] = set()
    for path in (EXAMPLE / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    ours = {name for name in imported if name.split(".")[0] == "imbucket"}
    assert "imbucket.plugin_api" in ours <= {"imbucket.plugin_api", "imbucket"}


def usage_error(*options: str) -> str:
    """pytest run with options in the checkout must stop with a usage error; its stderr."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    return run.stderr


def test_the_pytest_plugin_refuses_an_unknown_backend() -> None:
    stderr = usage_error("--imbucket-backend=no-such-store")
    assert "unknown store backend 'no-such-store'" in stderr


def test_the_pytest_plugin_refuses_an_unknown_capability() -> None:
    stderr = usage_error("--imbucket-backend=memory", "--imbucket-capabilities=x")
    assert "unknown capabilities ['x']" in stderr
    assert all(capability in stderr for capability in CAPABILITIES)


def test_the_wheel_ships_every_package_of_src_and_the_contract_suite() -> None:
    """pyproject.toml lists the packages one by one (the suite is mapped from tests/contract)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    src = ROOT / "src"
    found = {
        ".".join(("imbucket", *path.parent.relative_to(src).parts))
        for path in src.rglob("*.py")
        if "egg-info" not in str(path)
    }
    assert set(setuptools["packages"]) == found | {"imbucket.testing.suite"}
    assert setuptools["package-dir"]["imbucket"] == "src"
    assert setuptools["package-dir"]["imbucket.testing.suite"] == "tests/contract"
    assert suite_dir() == ROOT / "tests" / "contract"  # the editable install maps it there
