"""imbucket as a team embeds it: the built wheel in a fresh venv, next to a project of theirs.

The project has its own ``app``, ``domain``, ``ports``, ``adapters`` and ``tests`` packages
(the names imbucket's source folders have), and the venv holds another distribution that
installs an ``app`` package: none of them may change what ``import imbucket`` finds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A subset of the contract suite that still crosses every port: inserts, reads, tags, views.
CONTRACT_SUBSET = "test_insert or test_reads or test_views"


def uv() -> str:
    """The uv the Makefile uses: on PATH, else the one it installs into the venv."""
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    assert Path(found).exists(), "uv is needed to build the wheel: run make .venv/.installed-test"
    return found


def run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run args from cwd without this checkout's environment leaking in; check the exit code."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CI"] = "false"  # the model-based test at its ordinary size
    done = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


def build_imbucket_wheel(out: Path, scratch: Path) -> Path:
    """imbucket's wheel, built from a copy of the files it ships (the build writes beside them)."""
    source = scratch / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("src", "tests/contract"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(uv(), "build", "--quiet", "--wheel", "--out-dir", out, source, cwd=scratch)
    (wheel,) = out.glob("imbucket-*.whl")
    return wheel


def other_app_wheel(out: Path) -> Path:
    """A distribution of someone else's that installs a top-level ``app`` package."""
    wheel = out / "otherapp-1.0-py3-none-any.whl"
    info = "otherapp-1.0.dist-info"
    files = {
        "app/__init__.py": "OWNER = 'otherapp'\n",
        "app/backends.py": "raise ImportError('otherapp has no backends')\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: otherapp\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def user_project(path: Path) -> Path:
    """A service with the conventional package names, each holding a module imbucket has."""
    for package in ("app", "domain", "ports", "adapters", "tests"):
        (path / package).mkdir(parents=True)
        (path / package / "__init__.py").write_text(f"OWNER = 'usersvc {package}'\n")
    (path / "domain" / "tags.py").write_text("raise ImportError('the user domain has no tags')\n")
    (path / "app" / "backends.py").write_text("raise ImportError('the user app: no backends')\n")
    (path / "pyproject.toml").write_text('[project]\nname = "usersvc"\nversion = "1"\n')
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(imbucket's wheel, the venv's bin, the user project), the venv installed once."""
    scratch = tmp_path_factory.mktemp("foreign")
    wheels = scratch / "wheels"
    wheel = build_imbucket_wheel(wheels, scratch)
    venv = scratch / "venv"
    run(uv(), "venv", "--quiet", "--python", sys.executable, venv, cwd=scratch)
    install = [uv(), "pip", "install", "--quiet", "--python", venv / "bin" / "python"]
    packages = [f"{wheel}[contract]", other_app_wheel(wheels)]
    try:  # the dependencies from uv's cache, where this checkout's venv put them
        run(*install, "--offline", *packages, cwd=scratch)
    except AssertionError:
        run(*install, *packages, cwd=scratch)
    yield wheel, venv / "bin", user_project(scratch / "usersvc")


def test_the_wheel_installs_imbucket_alone_at_top_level(
    installed: tuple[Path, Path, Path],
) -> None:
    wheel = installed[0]
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    assert top == {"imbucket", "imbucket-0.1.0.dist-info"}


def test_the_public_surface_and_the_cli_work_beside_the_users_packages(
    installed: tuple[Path, Path, Path],
) -> None:
    _, bin_dir, project = installed
    script = (
        "import app, domain, imbucket\n"
        "from imbucket import Draft, open_service\n"
        "assert app.OWNER == 'usersvc app' and domain.OWNER == 'usersvc domain'\n"
        "assert 'site-packages' in imbucket.__file__, imbucket.__file__\n"
        "with open_service({'store': {'backend': 'memory'}}) as service:\n"
        "    service.send('c', [Draft(send_id='a', content='hi', client_msg_id='m')])\n"
        "    print(service.pull_latest('c', 'a')[0].content)\n"
    )
    assert run(bin_dir / "python", "-c", script, cwd=project).stdout == "hi\n"
    assert "Usage: imbucket" in run(bin_dir / "imbucket", "--help", cwd=project).stdout
    assert (
        "Usage: imbucket" in run(bin_dir / "python", "-m", "imbucket", "--help", cwd=project).stdout
    )


def test_the_contract_suite_runs_from_the_users_project(
    installed: tuple[Path, Path, Path],
) -> None:
    _, bin_dir, project = installed
    options = ("-p", "no:cacheprovider", "-q", "-k", CONTRACT_SUBSET)
    done = run(
        bin_dir / "python", "-m", "pytest", "--imbucket-backend", "memory", *options, cwd=project
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= 10, summary
