"""``imbucket migrate`` as a team runs it: config files, exit codes, a SIGKILL and a resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from imbucket.app import open_service
from imbucket.app.cli import cli
from imbucket.app.migrate import verify
from imbucket.domain.model import Draft
from imbucket.testing.factories import messages
from imbucket.testing.migration_data import GROUP, fill, views

IMBUCKET = str(Path(sys.executable).parent / "imbucket")


def _files(
    tmp_path: Path, source: str = "sql-row", target: str = "sql-bucket", size: int = 37
) -> tuple[Path, Path]:
    """A TOML source config and a JSON target config, each on an SQLite file of its own."""
    source_file = tmp_path / "source.toml"
    source_file.write_text(
        f'[store]\nbackend = "{source}"\nurl = "sqlite:///{tmp_path / "source.db"}"\n'
    )
    target_file = tmp_path / "target.json"
    store = {"backend": target, "url": f"sqlite:///{tmp_path / 'target.db'}", "bucket_size": size}
    target_file.write_text(json.dumps({"store": store}))
    return source_file, target_file


def _config(path: Path) -> dict[str, Any]:
    from imbucket.app.migrate import load_config

    return load_config(path)


def test_migrate_then_verify_exits_0_and_prints_a_summary(tmp_path: Path) -> None:
    source, target = _files(tmp_path)
    with open_service(_config(source)) as service:
        fill(service)
    result = CliRunner().invoke(
        cli, ["migrate", "--from", str(source), "--to", str(target), "--verify"]
    )
    assert result.exit_code == 0, result.output
    assert "messages" in result.output and "differences" in result.output
    with open_service(_config(source)) as one, open_service(_config(target)) as other:
        assert views(other) == views(one)


def test_a_conflict_exits_1_and_lists_it_and_verify_only_sees_it(tmp_path: Path) -> None:
    source, target = _files(tmp_path)
    with open_service(_config(source)) as service:
        fill(service)
    with open_service(_config(target)) as service:
        service.send(GROUP, [Draft(send_id="zed", content="mine", client_msg_id="zed-1")])
    runner = CliRunner()
    result = runner.invoke(cli, ["migrate", "--from", str(source), "--to", str(target)])
    assert result.exit_code == 1
    assert f"{GROUP} seq 1: source message 'send-1'" in result.output
    assert "target message 'zed-1'" in result.output
    result = runner.invoke(
        cli, ["migrate", "--from", str(source), "--to", str(target), "--verify-only"]
    )
    assert result.exit_code == 1
    assert f"{GROUP} seq 1:" in result.output
    with open_service(_config(target)) as service:
        assert service.store.get(GROUP, [1])[1].message.client_msg_id == "zed-1"  # type: ignore[union-attr]


def test_a_bad_config_exits_2(tmp_path: Path) -> None:
    source, _ = _files(tmp_path)
    bad = tmp_path / "target.yaml"
    bad.write_text("store: {}")
    result = CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", str(bad)])
    assert result.exit_code == 2
    assert ".toml or .json" in result.output


def _target_buckets(path: Path) -> int:
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM imb_bucket_docs").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not there yet
        return 0


def test_killed_mid_run_by_sigkill_it_resumes_and_verifies(tmp_path: Path) -> None:
    source, target = _files(tmp_path)
    with open_service(_config(source)) as service:
        for n in range(40):
            service.ingest(f"sg_{n:02}", messages(1, 150, f"sg_{n:02}"))
        fill(service)
    command = [IMBUCKET, "migrate", "--from", str(source), "--to", str(target), "--batch", "20"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):  # at most a minute
            if _target_buckets(tmp_path / "target.db") >= 3 or child.poll() is not None:
                break
            time.sleep(0.05)
        assert child.poll() is None, "the migration ended before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    partial = verify(_config(source), _config(target))
    assert partial.differences > 0  # killed with part of the data copied
    assert _target_buckets(tmp_path / "target.db") > 0

    resumed = subprocess.run([*command, "--verify"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert verify(_config(source), _config(target)).differences == 0
    with open_service(_config(source)) as one, open_service(_config(target)) as other:
        assert views(other) == views(one)
