"""A missing optional driver is a ConfigError that names the extra installing it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imbucket.app import open_service
from imbucket.app.cli import cli
from imbucket.domain.errors import ConfigError


@pytest.fixture(autouse=True)
def _forget_modules_imported_meanwhile() -> Iterator[None]:
    """Drop the imbucket modules a test imported anew once the old ones are back.

    A module first imported while its importers were forgotten holds the re-imported copies'
    classes; left in ``sys.modules`` beside the restored originals, it would mix the two.
    Third-party modules stay: some (matplotlib's) cannot be imported twice in one process.
    """
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] == "imbucket":
            del sys.modules[name]


def _without(monkeypatch: pytest.MonkeyPatch, module: str, *importers: str) -> None:
    """Make module unimportable, and forget the modules that import it (restored after)."""
    monkeypatch.setitem(sys.modules, module, None)
    for name in list(sys.modules):
        if name == module or name.startswith(f"{module}."):
            monkeypatch.setitem(sys.modules, name, None)
        elif any(name == i or name.startswith(f"{i}.") for i in importers):
            monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize(
    ("store", "module", "extra"),
    [
        ({"backend": "sql-row", "url": "postgresql://u@127.0.0.1/db"}, "psycopg", "postgres"),
        ({"backend": "sql-bucket", "url": "mysql+pymysql://u@127.0.0.1/db"}, "pymysql", "mariadb"),
        ({"backend": "mongo-row", "url": "mongodb://127.0.0.1/db"}, "pymongo", "mongo"),
        ({"backend": "mongo-bucket", "url": "mongodb://127.0.0.1/db"}, "pymongo", "mongo"),
    ],
)
def test_a_missing_store_driver_names_its_extra(
    store: dict[str, str], module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without(monkeypatch, module, "imbucket.adapters.mongo", "bson")
    with pytest.raises(ConfigError, match=rf"pip install 'imbucket\[{extra}\]'"):
        open_service({"store": store})


REDIS_ADAPTERS = (
    "imbucket.adapters.redis_cache",
    "imbucket.adapters.redis_client",
    "imbucket.adapters.redis_breaker",
    "imbucket.adapters.redis_scripts",
    "imbucket.adapters.redis_values",
)


def test_a_missing_redis_driver_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "redis", *REDIS_ADAPTERS)
    with pytest.raises(ConfigError, match=r"pip install 'imbucket\[redis\]'"):
        open_service({"cache": {"backend": "redis"}})


def test_backends_without_pymongo_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without(monkeypatch, "pymongo", "imbucket.adapters.mongo", "bson")
    monkeypatch.delenv("IMBUCKET_CONFIG", raising=False)
    monkeypatch.setenv("IMBUCKET_STORE__BACKEND", "mongo-row")
    monkeypatch.setenv("IMBUCKET_STORE__URL", "mongodb://127.0.0.1/db")
    result = CliRunner().invoke(cli, ["backends"])
    assert not isinstance(result.exception, ModuleNotFoundError), result.exception
    assert "pip install 'imbucket[mongo]'" in result.output


_BENCH_COMMANDS = {
    "bench": ["bench", "--backend", "memory"],
    "plan": ["plan", "results.json"],
    "compare": ["compare", "old.json", "new.json"],
}


@pytest.mark.parametrize("command", sorted(_BENCH_COMMANDS))
@pytest.mark.parametrize("module", ["hdrh", "matplotlib"])
def test_bench_without_its_extra_names_it_in_one_line_and_exits_2(
    module: str, command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without(monkeypatch, module, "imbucket.bench")
    monkeypatch.chdir(tmp_path)
    for name in ("results.json", "old.json", "new.json"):
        (tmp_path / name).write_text("{}")
    result = CliRunner().invoke(cli, _BENCH_COMMANDS[command])
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert f"imbucket {command}" in line and "pip install 'imbucket[bench]'" in line


def test_a_bench_backend_without_its_driver_is_skipped_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without(monkeypatch, "psycopg", "sqlalchemy.dialects.postgresql")
    backend = "sql-row@postgresql+psycopg://u@127.0.0.1:1/db"
    result = CliRunner().invoke(cli, ["bench", "--backend", backend, "--scale", "tiny"])
    output = " ".join(result.output.split())
    assert "skipped sql-row/postgresql" in output, output
    assert "pip install 'imbucket[postgres]'" in output, output


@pytest.mark.parametrize(("engine", "module", "extra"), [("postgresql", "psycopg", "postgres")])
def test_a_review_of_an_engine_without_its_driver_says_so_in_one_line_before_starting_it(
    engine: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _without(monkeypatch, module, "sqlalchemy.dialects.postgresql")
    started: list[object] = []
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: started.append(a))
    out = tmp_path / "memo"
    result = CliRunner().invoke(cli, ["review", "--engines", engine, "--out", str(out)])
    assert result.exit_code == 2, result.output
    *plan, line = result.output.strip().splitlines()  # the budget's plan, then the error
    assert all(shown.startswith("plan: ") for shown in plan), result.output
    assert "imbucket review" in line and f"pip install 'imbucket[{extra}]'" in line
    assert started == []


_BLOCK_NUMPY = """
import sys

class _NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "numpy":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoNumpy())
"""
SAMPLE_RESULTS = Path(__file__).parents[2] / "docs" / "samples" / "bench-tiny" / "results.json"


@pytest.mark.parametrize(
    "command",
    [
        ["plan", str(SAMPLE_RESULTS)],
        ["compare", str(SAMPLE_RESULTS), str(SAMPLE_RESULTS)],
        ["bench", "--backend", "memory", "--scale", "tiny"],
        ["review", "--engines", "sqlite"],
    ],
    ids=lambda command: command[0],
)
def test_a_lab_command_without_numpy_is_one_line_naming_the_extra(
    command: list[str], tmp_path: Path
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_BLOCK_NUMPY)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-m", "imbucket", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.splitlines() == [
        f"imbucket {command[0]}: ConfigError: imbucket {command[0]} needs the 'numpy' package, "
        "which is not installed: pip install 'imbucket[bench]'"
    ]
