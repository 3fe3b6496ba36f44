"""The imbucket command line as people run it: version, settings files, help, flags, mistakes."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imbucket.app.cli import cli

VERSION = metadata.version("imbucket")
MISSING = "/nonexistent/imbucket-settings.toml"


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees only the settings it sets, whatever the shell running pytest exports."""
    monkeypatch.delenv("IMBUCKET_CONFIG", raising=False)
    for name in [name for name in os.environ if name.startswith("IMBUCKET_")]:
        if not name.startswith("IMBUCKET_TEST_"):
            monkeypatch.delenv(name)


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_version_prints_the_installed_version() -> None:
    code, out, _ = _run("--version")
    assert code == 0
    assert out == f"imbucket {VERSION}\n"


@pytest.mark.parametrize("module", ["imbucket"])
def test_python_dash_m_runs_the_cli(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"imbucket {VERSION}\n"
    helped = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0 and "migrate" in helped.stdout


def _settings(tmp_path: Path) -> Path:
    """A TOML settings file: sql-bucket with 20-slot buckets on an SQLite file."""
    path = tmp_path / "settings.toml"
    db = tmp_path / "chat.db"
    path.write_text(f'[store]\nbackend = "sql-bucket"\nurl = "sqlite:///{db}"\nbucket_size = 20\n')
    return path


def test_demo_inspect_and_backends_take_a_settings_file(tmp_path: Path) -> None:
    config = str(_settings(tmp_path))
    code, out, err = _run("backends", "--config", config)
    assert code == 0, err
    assert "reachable" in out and "store sql-bucket" in out
    code, out, err = _run("demo", "--config", config)
    assert code == 0, err
    assert "store sql-bucket" in out
    assert (tmp_path / "chat.db").is_file()
    code, out, err = _run("inspect", "demo-conversation", "150", "--config", config)
    assert code == 0, err
    assert "(seq - 1) // 20" in out  # the file's bucket size, not the default 100
    assert '"content": "chatter #150"' in out  # stored by demo in the file's database


@pytest.mark.parametrize("command", [[], ["demo"], ["inspect"], ["backends"], ["migrate"]])
def test_help_names_the_settings_file_and_environment(command: list[str]) -> None:
    code, out, _ = _run(*command, "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "IMBUCKET_CONFIG" in flat
    assert "IMBUCKET_STORE__BACKEND=" in flat


def test_help_keeps_square_brackets() -> None:
    assert "Derive a [traffic] table" in " ".join(_run("--help")[1].split())
    assert "with a [traffic] table" in " ".join(_run("bench", "--help")[1].split())
    assert "the [traffic] table" in " ".join(_run("profile", "--help")[1].split())


COMMANDS = ["demo", "inspect", "backends", "bench", "profile", "compare", "migrate"]


@pytest.mark.parametrize("command", [[], *([name] for name in COMMANDS)])
def test_boolean_options_are_shown_as_flags(command: list[str]) -> None:
    out = _run(*command, "--help")[1]
    assert "<bool>" not in out
    if command == ["migrate"]:
        assert "--verify / --no-verify" in out
    if command == ["bench"]:
        assert "--contention / --no-contention" in out
        assert "--sends / --no-sends" in out


def test_verify_has_a_negative_form(tmp_path: Path) -> None:
    config = str(_settings(tmp_path))
    other = tmp_path / "other.json"
    other.write_text(f'{{"store": {{"backend": "sql-row", "url": "sqlite:///{tmp_path}/o.db"}}}}')
    code, out, err = _run("migrate", "--from", config, "--to", str(other), "--no-verify")
    assert code == 0, err
    assert "verify" not in out


# Every command, as a user mistypes a settings file: IMBUCKET_CONFIG, or the command's own file.
MISTAKES = {
    "demo": (["demo"], ["demo", "--config", MISSING]),
    "inspect": (["inspect", "c", "1"], ["inspect", "c", "1", "--config", MISSING]),
    "backends": (["backends"], ["backends", "--config", MISSING]),
    "bench": (["bench", "--scale", "tiny"], ["bench", "--config", MISSING]),
    "profile": (None, ["profile", "--config", MISSING]),
    "compare": (None, ["compare", MISSING, MISSING]),
    "migrate": (["migrate", "--from", "{ok}", "--to", "{ok}"], ["migrate", "--from", MISSING]),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_settings_file_is_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    ok = str(_settings(tmp_path))
    with_env, with_option = MISTAKES[command]
    runs = [] if with_env is None else [(with_env, {"IMBUCKET_CONFIG": MISSING})]
    runs.append((with_option + (["--to", ok] if command == "migrate" else []), None))
    for args, env in runs:
        code, out, err = _run(*(arg.replace("{ok}", ok) for arg in args), env=env)
        assert code == 2, (args, out, err)
        assert len(err.splitlines()) == 1, err
        assert "imbucket-settings.toml" in err
        assert "Traceback" not in out + err


def test_a_store_error_on_a_valid_command_is_one_line_and_exit_2() -> None:
    code, _, err = _run("inspect", "demo-conversation", "0")
    assert code == 2
    assert err.startswith("imbucket inspect: InvalidSeq:") and len(err.splitlines()) == 1


def test_a_bench_in_which_every_backend_is_skipped_writes_no_report(tmp_path: Path) -> None:
    unreachable = "sql-row@sqlite:////nonexistent/imbucket-bench.db"
    out_dir = tmp_path / "report"
    code, out, err = _run("bench", "-b", unreachable, "--scale", "tiny", "--out", str(out_dir))
    assert code == 1
    assert not out_dir.exists()
    assert "report:" not in out
    said = " ".join(err.split())  # rich wraps long lines
    assert "skipped sql-row/sqlite: StoreUnavailable: SQLite /nonexistent/imbucket-bench.db" in said
    assert "every backend was skipped (sql-row/sqlite); no report" in said
    assert "Warning" not in err
