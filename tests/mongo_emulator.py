"""The MongoDB stand-in the suite starts when no MongoDB URL is set and no Docker answers.

mongoeco (PyPI, pinned below) serves the MongoDB wire protocol from a separate process; the
driver talks to it over TCP on loopback exactly as to ``mongod``. mongoeco needs Python
>= 3.13 while the project runs on >= 3.11, so it lives in a venv of its own,
``.venv-mongoeco``, built here on first use from the package registry and reused while it
holds the pinned version. Nothing here imports mongoeco: tools/mongoeco_server.py runs it.

    .venv/bin/python -m tests.mongo_emulator     # build .venv-mongoeco (what `make mongoeco` does)
"""

from __future__ import annotations

import fcntl
import glob
import os
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

VERSION = "4.11.0"
REQUIREMENT = f"mongoeco[wire]=={VERSION}"
ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-mongoeco"
LAUNCHER = ROOT / "tools" / "mongoeco_server.py"
PYTHON_VARIABLE = "IMBUCKET_MONGOECO_PYTHON"
START_TIMEOUT = 60.0  # seconds for the server to print its address (imports take ~2 s)
# mongoeco runs every command on one event loop, and a long one (a bulk write into a large
# collection takes seconds on a busy 2-core machine) delays the driver's heartbeat and every
# reply queued behind it; with the adapters' fail-fast defaults (store.*_timeout_seconds) the
# driver would then cancel operations that are merely slow. Tests of the timeouts themselves
# (tests/faults/test_black_hole.py) drop these options and set their own.
# Two test workers share the 2 cores with two emulators: 120 s.
PATIENT = (
    "connectTimeoutMS=120000&serverSelectionTimeoutMS=120000"
    "&socketTimeoutMS=120000&waitQueueTimeoutMS=120000"
)


class NoPython(Exception):
    """No Python >= 3.13 on this machine: the emulator cannot run here."""


@dataclass(frozen=True)
class Emulator:
    """A running mongoeco server."""

    url: str
    description: str


def _is_recent(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; sys.exit(sys.version_info < (3, 13))"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _candidates() -> Iterator[str]:
    if os.environ.get(PYTHON_VARIABLE):
        yield os.environ[PYTHON_VARIABLE]
    yield sys.executable
    for name in ("python3.13", "python3.14", "python3.15"):
        found = shutil.which(name)
        if found:
            yield found
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    for prefix in sorted(glob.glob(f"{root}/versions/3.1[3-9]*"), reverse=True):
        yield f"{prefix}/bin/python3"


def find_python() -> str:
    """Path of a Python >= 3.13: $IMBUCKET_MONGOECO_PYTHON, this one, PATH, then pyenv."""
    for python in _candidates():
        if _is_recent(python):
            return python
    raise NoPython(
        "no Python >= 3.13 found for the mongoeco test server "
        f"(set {PYTHON_VARIABLE}, put python3.13 on PATH or install it with pyenv)"
    )


@contextmanager
def _locked() -> Iterator[None]:
    """One builder at a time: two pytest runs in one checkout may both want the venv."""
    with open(ROOT / ".venv-mongoeco.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_venv() -> Path:
    """The venv's python, after installing the pinned mongoeco if it is not there yet."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    with _locked():
        if stamp.exists() and stamp.read_text() == REQUIREMENT and python.exists():
            return python
        interpreter = find_python()
        subprocess.run([interpreter, "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, REQUIREMENT], check=True)
        stamp.write_text(REQUIREMENT)
    return python


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line the server prints, or '' when it prints none within timeout."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    return process.stdout.readline() if ready else ""


@contextmanager
def running_emulator(host: str = "127.0.0.1") -> Iterator[Emulator]:
    """Start mongoeco on a free port of host; stop it (close its stdin) on exit."""
    python = ensure_venv()
    log = VENV / "server.log"
    with open(log, "w") as errors:
        process = subprocess.Popen(
            [str(python), str(LAUNCHER), "--host", host, "--port", "0", "--stop-on-eof"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        line = _first_line(process, START_TIMEOUT)
        if not line.startswith("listening "):
            raise RuntimeError(f"mongoeco did not start: {line!r}; see {log}")
        _, bound, port = line.split()
        yield Emulator(
            f"mongodb://{bound}:{port}/?{PATIENT}",
            f"mongoeco {VERSION} started by the suite on {bound}:{port}",
        )
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """End of stdin asks the server to stop; a server that does not is terminated."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


if __name__ == "__main__":
    try:
        print(f"mongoeco test server venv: {ensure_venv()} ({REQUIREMENT})")
    except NoPython as error:
        sys.exit(f"cannot build the mongoeco venv: {error}")
