"""A migration that cannot keep its copy is refused before anything is written.

A source or target that keeps nothing once closed (memory, an in-memory SQLite URL) and a
target that is the source's store: EphemeralStore / SameStore from the API, exit 2 from
``imbucket migrate``. ``--allow-ephemeral-target`` lets an ephemeral target through.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from imbucket.app import open_service
from imbucket.app.cli import cli
from imbucket.app.migrate import EphemeralStore, SameStore, migrate, verify
from imbucket.domain.errors import ConfigError
from imbucket.testing.migration_data import fill

EPHEMERAL_TARGETS: list[dict[str, Any]] = [
    {"backend": "memory"},
    {"backend": "sql-bucket"},  # no url: an in-memory SQLite database
    {"backend": "sql-row", "url": "sqlite://"},
    {"backend": "sql-row", "url": "sqlite:///:memory:"},
    {"backend": "sql-bucket", "url": "sqlite:///file:scratch?mode=memory&uri=true"},
]


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMBUCKET_CONFIG", raising=False)


def _filled(tmp_path: Path, backend: str = "sql-row") -> Path:
    """A TOML config of an SQLite file holding the migration data set."""
    path = tmp_path / "source.toml"
    path.write_text(f'[store]\nbackend = "{backend}"\nurl = "sqlite:///{tmp_path / "src.db"}"\n')
    with open_service(_store(backend, f"sqlite:///{tmp_path / 'src.db'}")) as service:
        fill(service)
    return path


def _store(backend: str, url: str) -> dict[str, Any]:
    return {"store": {"backend": backend, "url": url}}


def _config_file(tmp_path: Path, name: str, store: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"store": store}))
    return path


def _slots(database: Path) -> int:
    with sqlite3.connect(database) as connection:
        tables = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return sum(
            connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in tables
            if table.startswith("imb_")
        )


@pytest.mark.parametrize("store", EPHEMERAL_TARGETS, ids=lambda s: s.get("url", s["backend"]))
def test_the_cli_refuses_an_ephemeral_target_with_exit_2(
    store: dict[str, Any], tmp_path: Path
) -> None:
    source = _filled(tmp_path)
    target = _config_file(tmp_path, "target.json", store)
    result = CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", str(target)])
    assert result.exit_code == 2, result.output
    assert "the copy would be gone when the run ends" in " ".join(result.output.split())


def test_allow_ephemeral_target_lets_an_experiment_run(tmp_path: Path) -> None:
    source = _filled(tmp_path)
    target = _config_file(tmp_path, "target.json", {"backend": "sql-bucket"})
    args = ["migrate", "--from", str(source), "--to", str(target), "--allow-ephemeral-target"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("store", EPHEMERAL_TARGETS[:3], ids=lambda s: s.get("url", s["backend"]))
def test_the_cli_refuses_an_ephemeral_source_with_exit_2(
    store: dict[str, Any], tmp_path: Path
) -> None:
    source = _config_file(tmp_path, "source.json", store)
    target = _config_file(tmp_path, "target.json", _store("sql-row", f"sqlite:///{tmp_path}/t.db"))
    result = CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", str(target)])
    assert result.exit_code == 2, result.output
    assert "holds nothing to copy" in " ".join(result.output.split())
    assert not (tmp_path / "t.db").exists()


def test_the_cli_refuses_migrating_a_store_into_itself(tmp_path: Path) -> None:
    source = _filled(tmp_path)
    before = _slots(tmp_path / "src.db")
    # The same file, named differently: relative to another directory, through "..".
    other = _config_file(
        tmp_path, "same.json", {"backend": "sql-row", "url": f"sqlite:///{tmp_path}/x/../src.db"}
    )
    for target in (source, other):
        for extra in ([], ["--verify-only"]):
            args = ["migrate", "--from", str(source), "--to", str(target), *extra]
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 2, result.output
            assert "the target is the source's store" in " ".join(result.output.split())
    assert _slots(tmp_path / "src.db") == before


def test_the_api_raises_typed_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    persistent = _store("sql-row", url)
    with pytest.raises(EphemeralStore, match="the copy would be gone"):
        migrate(persistent, {"store": {"backend": "memory"}})
    with pytest.raises(EphemeralStore, match="holds nothing to copy"):
        migrate({"store": {"backend": "sql-row", "url": "sqlite://"}}, persistent)
    with pytest.raises(SameStore):
        migrate(persistent, _store("sql-row", url))
    with pytest.raises(SameStore):
        verify(persistent, _store("sql-row", url))
    assert issubclass(EphemeralStore, ConfigError) and issubclass(SameStore, ConfigError)


def test_the_api_allows_an_ephemeral_target_when_asked(tmp_path: Path) -> None:
    source = _filled(tmp_path)
    tally = migrate(source, {"store": {"backend": "memory"}}, allow_ephemeral_target=True)
    assert tally.messages > 0


def test_one_service_as_both_ends_is_the_same_store() -> None:
    with open_service({"store": {"backend": "memory"}}) as service, pytest.raises(SameStore):
        migrate(service, service)


def test_row_and_bucket_stores_in_one_database_are_different_stores(tmp_path: Path) -> None:
    source = _filled(tmp_path)
    target = _config_file(
        tmp_path, "target.json", {"backend": "sql-bucket", "url": f"sqlite:///{tmp_path}/src.db"}
    )
    assert migrate(source, target).messages > 0
