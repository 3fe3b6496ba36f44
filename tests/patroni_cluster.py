"""PostgreSQL high availability of the test run's own: Patroni, one etcd, three members.

Started once per session by the ``patroni_cluster`` fixture (tests/conftest.py) with the
system's ``etcd``, ``patroni`` and PostgreSQL 15 binaries, in a temporary directory, on free
loopback ports: one leader, one synchronous standby and one replica (``synchronous_mode``),
each with small buffers. Members run as the ``postgres`` user when the tests run as root
(PostgreSQL refuses root). ``primary_start_timeout: 0`` makes Patroni fail over at once when
the primary's postmaster dies, instead of restarting it in place. Every wait is bounded;
``stop`` (also run at exit) kills every process and removes the directory. The system's own
PostgreSQL and its data are never touched.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import as_user, free_ports

MEMBERS = 3
BIN_DIR = Path("/usr/lib/postgresql/15/bin")
START_SECONDS = 90.0
USER = "postgres"
# The leader key lives this long without renewal: a member whose Patroni died altogether is
# replaced after it; a primary whose postmaster died is replaced at Patroni's next loop.
TTL_SECONDS = 10
LOOP_WAIT_SECONDS = 1


@dataclass
class Member:
    """One Patroni and the PostgreSQL it runs: its database port and REST API port."""

    name: str
    port: int
    rest: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def postmaster_pid(self) -> int | None:
        """The pid of this member's postmaster, if one runs."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@dataclass
class PatroniCluster:
    """The etcd and the members; ``url`` names every member (the primary is found by libpq)."""

    directory: Path
    members: list[Member] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None
    etcd_port: int = 0

    def start(self) -> None:
        """Start etcd, then the members; wait for a leader and two streaming standbys."""
        ports = free_ports(2 + 2 * MEMBERS)
        self.etcd_port, peer = ports[0], ports[1]
        self.etcd = subprocess.Popen(
            [
                "etcd", "--name", "imb", "--data-dir", str(self.directory / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"imb=http://127.0.0.1:{peer}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / "etcd.log").open("wb"),
        )  # fmt: skip
        for index in range(MEMBERS):
            port, rest = ports[2 + 2 * index : 4 + 2 * index]
            member = Member(f"pg{index}", port, rest, self.directory / f"pg{index}")
            member.directory.mkdir(mode=0o700)
            (member.directory / "patroni.yml").write_text(self._config(member))
            if os.geteuid() == 0:
                shutil.chown(member.directory, USER, USER)
                shutil.chown(member.directory / "patroni.yml", USER, USER)
            self.members.append(member)
        for member in self.members:
            member.process = self._spawn(member)
        self.wait_healthy()

    @property
    def url(self) -> str:
        """A psycopg URL naming every member; only the read-write one is connected to."""
        hosts = "&".join(f"host={member.address}" for member in self.members)
        return f"postgresql+psycopg://postgres@/postgres?{hosts}&target_session_attrs=read-write"

    def state(self) -> list[dict[str, Any]]:
        """The members as Patroni's REST API (/cluster) of any live member lists them."""
        for member in self.members:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{member.rest}/cluster", timeout=2
                ) as reply:
                    members: list[dict[str, Any]] = json.load(reply)["members"]
                    return members
            except (OSError, ValueError, KeyError):
                continue
        return []

    def healthy(self, standbys: int = MEMBERS - 1) -> bool:
        """A running leader, a sync standby, and standbys streaming replicas in all."""
        members = self.state()
        roles = [m["role"] for m in members if m.get("state") in ("running", "streaming")]
        streaming = sum(role in ("sync_standby", "replica") for role in roles)
        return "leader" in roles and "sync_standby" in roles and streaming >= standbys

    def leader(self) -> Member:
        name = next(m["name"] for m in self.state() if m["role"] == "leader")
        return next(member for member in self.members if member.name == name)

    def wait_healthy(self, standbys: int = MEMBERS - 1, timeout: float = START_SECONDS) -> float:
        """Wait until healthy(standbys); returns the seconds waited."""
        return self._wait(lambda: self.healthy(standbys), "a leader with a sync standby", timeout)

    def wait_leader_other_than(self, old: Member, timeout: float = START_SECONDS) -> float:
        """Wait until a member other than old leads; returns the seconds waited."""

        def promoted() -> bool:
            leaders = [m for m in self.state() if m["role"] == "leader"]
            return (
                bool(leaders)
                and leaders[0]["name"] != old.name
                and leaders[0]["state"] == ("running")
            )

        return self._wait(promoted, f"a leader other than {old.name}", timeout)

    def kill_postmaster(self, member: Member) -> None:
        """SIGKILL the member's postmaster (its Patroni lives on and hands the lead over)."""
        pid = member.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{member.name}: no postmaster runs")
        os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Kill every Patroni, postmaster and etcd; remove the directory (idempotent)."""
        for member in self.members:
            if member.process is not None and member.process.poll() is None:
                member.process.kill()
                member.process.wait(10)
        for member in self.members:
            pid = member.postmaster_pid()
            if pid is not None:
                _kill_quietly(pid)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.kill()
            self.etcd.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _spawn(self, member: Member) -> subprocess.Popen[bytes]:
        log = (member.directory / "patroni.log").open("wb")
        return subprocess.Popen(
            ["patroni", str(member.directory / "patroni.yml")],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=member.directory,
            **as_user(USER),
        )

    def _config(self, member: Member) -> str:
        config = {
            "scope": "imbucket-test",
            "name": member.name,
            "log": {"level": "WARNING"},
            "restapi": {
                "listen": f"127.0.0.1:{member.rest}",
                "connect_address": f"127.0.0.1:{member.rest}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_SECONDS,
                    "loop_wait": LOOP_WAIT_SECONDS,
                    "retry_timeout": 3,
                    "synchronous_mode": True,
                    "primary_start_timeout": 0,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "shared_buffers": "16MB",
                            "max_connections": 300,
                            "full_page_writes": "on",
                            "wal_log_hints": "on",
                            "wal_keep_size": "64MB",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}],
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": member.address,
                "connect_address": member.address,
                "data_dir": str(member.data_dir),
                "bin_dir": str(BIN_DIR),
                "pgpass": str(member.directory / "pgpass"),
                "authentication": {
                    "superuser": {"username": USER},
                    "replication": {"username": USER},
                    "rewind": {"username": USER},
                },
                "parameters": {"unix_socket_directories": str(member.directory)},
            },
        }
        return json.dumps(config)  # JSON is YAML

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if ready():
                return time.monotonic() - started
            time.sleep(0.2)
        logs = "".join(
            f"\n--- {log}\n{log.read_text(errors='replace')[-1500:]}"
            for log in sorted(self.directory.glob("*/patroni.log"))
        )
        raise RuntimeError(f"patroni cluster: {what} not reached within {timeout} s{logs}")


def _kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def start_cluster() -> PatroniCluster:
    """A started cluster (stopped again if starting fails, and at exit); skips without Patroni."""
    if shutil.which("patroni") is None or shutil.which("etcd") is None:
        pytest.skip("patroni: needs the patroni and etcd-server packages")
    if not (BIN_DIR / "postgres").exists():
        pytest.skip(f"patroni: needs the PostgreSQL 15 binaries in {BIN_DIR}")
    directory = Path(tempfile.mkdtemp(prefix="imbucket-patroni-"))
    directory.chmod(0o755)
    cluster = PatroniCluster(directory)
    atexit.register(cluster.stop)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def main() -> None:
    """Start a cluster, print its URL, keep it until stdin closes or an hour passed.

    ``.venv/bin/python -m tests.patroni_cluster`` (as root or as an ordinary user) gives
    the benchmark a cluster to run on (docs/scaling.md).
    """
    import select
    import sys

    cluster = start_cluster()
    try:
        print(cluster.url, flush=True)
        select.select([sys.stdin], [], [], 3600)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
