"""A MariaDB Galera cluster of the test run's own: 3 nodes, multi-master, on free loopback ports.

Started once per session by the ``galera_cluster`` fixture (tests/conftest.py) with the
system's ``mariadbd`` and the ``galera-4`` provider, each node with its own defaults file,
data directory and small buffers in a temporary directory; the first node bootstraps the
cluster, the others join it by a full state transfer (rsync). The nodes run as the ``mysql``
user when the tests run as root (rsync state transfer refuses a root server). Every wait is
bounded; ``stop`` (also run at exit) kills every process and removes the directory. The
system's own MariaDB and its data are never touched.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest

from tests.private_servers import as_user, free_ports

NODES = 3
PROVIDER = "/usr/lib/galera/libgalera_smm.so"
START_SECONDS = 90.0
USER = "mysql"
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
# Failure detection: a silent node is dropped from the view after a few seconds instead of
# the default ~6, so writes on the survivors block only briefly after a node dies.
_EVS = (
    "evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;"
    "evs.inactive_check_period=PT0.5S;evs.install_timeout=PT3S"
)
_RECOVERED = re.compile(r"WSREP: Recovered position: ([0-9a-f-]+:-?\d+)")


@dataclass
class GaleraNode:
    """One mariadbd of the cluster and its ports: client, group communication, IST, SST."""

    index: int
    port: int
    gcomm: int
    ist: int
    sst: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def defaults_file(self) -> Path:
        return self.directory / "my.cnf"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def status(self, name: str) -> str:
        """One wsrep status variable of this node ("" when it cannot be asked)."""
        try:
            connection = pymysql.connect(
                host="127.0.0.1", port=self.port, user="root", connect_timeout=2, read_timeout=5
            )
        except pymysql.MySQLError:
            return ""
        try:
            with connection.cursor() as cursor:
                cursor.execute("SHOW STATUS LIKE %s", (name,))
                row = cursor.fetchone()
        except pymysql.MySQLError:
            return ""
        finally:
            connection.close()
        return str(row[1]) if row else ""

    def synced(self, size: int) -> bool:
        """Whether this node is Synced in a primary view of size nodes."""
        return (
            self.alive()
            and self.status("wsrep_local_state_comment") == "Synced"
            and self.status("wsrep_cluster_size") == str(size)
        )


@dataclass
class GaleraCluster:
    """The cluster's nodes; ``url`` names one node, ``urls`` every node of one database."""

    directory: Path
    nodes: list[GaleraNode] = field(default_factory=list)

    def start(self) -> None:
        """Bootstrap the first node, join the others one by one, wait until all are Synced."""
        ports = free_ports(4 * NODES)
        for index in range(NODES):
            node_dir = self.directory / f"node{index}"
            node = GaleraNode(index, *ports[4 * index : 4 * index + 4], directory=node_dir)
            self.nodes.append(node)
        members = ",".join(f"127.0.0.1:{node.gcomm}" for node in self.nodes)
        for node in self.nodes:
            (node.directory / "data").mkdir(parents=True)
            node.defaults_file.write_text(_defaults(node, members))
            _chown(node.directory)
        _install(self.nodes[0])
        self.nodes[0].process = self._spawn(self.nodes[0], "--wsrep-new-cluster")
        self.wait_synced(1)
        for joined, node in enumerate(self.nodes[1:], start=2):
            node.process = self._spawn(node)
            self.wait_synced(joined)

    def url(self, node: GaleraNode, database: str = "") -> str:
        return f"mysql+pymysql://root@{node.address}/{database}"

    def urls(self, database: str, first: int = 0) -> str:
        """A URL naming every node (first one first): the store spreads connections over them."""
        order = self.nodes[first:] + self.nodes[:first]
        hosts = "&".join(f"host={node.address}" for node in order)
        return f"mysql+pymysql://root@/{database}?{hosts}"

    def alive_nodes(self) -> list[GaleraNode]:
        return [node for node in self.nodes if node.alive()]

    def wait_synced(self, size: int = NODES, timeout: float = START_SECONDS) -> float:
        """Wait until size live nodes are Synced in one view; returns the seconds waited."""
        nodes = self.alive_nodes()
        return _wait(
            lambda: len(nodes) == size and all(node.synced(size) for node in nodes),
            f"{size} nodes Synced",
            timeout,
            self.directory,
        )

    def kill(self, node: GaleraNode) -> None:
        """SIGKILL one node (no shutdown, no goodbye to the cluster)."""
        assert node.process is not None
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(10)

    def rejoin(self, node: GaleraNode) -> str:
        """Restart a killed node at its recovered position (so it catches up by IST).

        Returns the position ``mariadbd --wsrep-recover`` found.
        """
        log = node.directory / "error.log"
        seen = log.stat().st_size if log.exists() else 0
        subprocess.run(
            [MARIADBD, f"--defaults-file={node.defaults_file}", "--wsrep-recover"],
            timeout=START_SECONDS,
            check=True,
            capture_output=True,
            **as_user(USER),
        )
        found = _RECOVERED.findall(log.read_text(errors="replace")[seen:])
        if not found:
            raise RuntimeError(f"galera node {node.index}: --wsrep-recover found no position")
        node.process = self._spawn(node, f"--wsrep-start-position={found[-1]}")
        return found[-1]

    def ist_used(self, node: GaleraNode) -> bool:
        """Whether the node's last join was an incremental state transfer."""
        text = (node.directory / "error.log").read_text(errors="replace")
        return "IST received" in text or "Receiving IST" in text

    def stop(self) -> None:
        """Kill every node and remove the directory (idempotent)."""
        for node in self.nodes:
            if node.alive():
                assert node.process is not None
                node.process.kill()
                node.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _spawn(self, node: GaleraNode, *extra: str) -> subprocess.Popen[bytes]:
        # The defaults file comes first, so that the system's my.cnf stays out.
        return subprocess.Popen(
            [MARIADBD, f"--defaults-file={node.defaults_file}", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **as_user(USER),
        )


def _defaults(node: GaleraNode, members: str) -> str:
    data = node.directory / "data"
    options = (
        f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm};ist.recv_addr=127.0.0.1:{node.ist};"
        f"gcache.size=16M;{_EVS}"
    )
    return f"""[mysqld]
datadir={data}
socket={node.directory / "mysqld.sock"}
pid-file={node.directory / "mysqld.pid"}
log-error={node.directory / "error.log"}
tmpdir={node.directory}
port={node.port}
bind-address=127.0.0.1
skip-name-resolve
max_connections=400
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
performance_schema=OFF
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider={PROVIDER}
wsrep_cluster_name=imbucket_test
wsrep_cluster_address=gcomm://{members}
wsrep_node_name=node{node.index}
wsrep_node_address=127.0.0.1:{node.gcomm}
wsrep_node_incoming_address={node.address}
wsrep_provider_options="{options}"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:{node.sst}
wsrep_slave_threads=2
"""


def _install(node: GaleraNode) -> None:
    """The system tables of the bootstrap node; root may log in from 127.0.0.1 unasked."""
    subprocess.run(
        [
            "mariadb-install-db",
            f"--defaults-file={node.defaults_file}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *(["--user", USER] if os.geteuid() == 0 else []),
        ],
        timeout=START_SECONDS,
        check=True,
        capture_output=True,
    )


def _chown(path: Path) -> None:
    if os.geteuid() != 0:
        return
    for item in [path, *path.rglob("*")]:
        shutil.chown(item, USER, USER)


def _wait(ready: Callable[[], bool], what: str, timeout: float, directory: Path) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if ready():
            return time.monotonic() - started
        time.sleep(0.2)
    logs = "".join(
        f"\n--- {log}\n{log.read_text(errors='replace')[-1500:]}"
        for log in sorted(directory.glob("node*/error.log"))
    )
    raise RuntimeError(f"galera cluster: {what} not reached within {timeout} s{logs}")


def start_cluster() -> GaleraCluster:
    """A started cluster (stopped again if starting fails, and at exit); skips without Galera."""
    if not Path(MARIADBD).exists():
        pytest.skip("galera: mariadbd is not installed")
    if not Path(PROVIDER).exists() or shutil.which("rsync") is None:
        pytest.skip(f"galera: needs the galera-4 provider ({PROVIDER}) and rsync")
    directory = Path(tempfile.mkdtemp(prefix="imbucket-galera-"))
    directory.chmod(0o755)
    cluster = GaleraCluster(directory)
    atexit.register(cluster.stop)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


DATABASE = "imbucket"


def _create_database(cluster: GaleraCluster) -> None:
    node = cluster.nodes[0]
    connection = pymysql.connect(host="127.0.0.1", port=node.port, user="root")
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    finally:
        connection.close()


def main() -> None:
    """Start a cluster, print its URL, keep it until stdin closes or an hour passed.

    ``.venv/bin/python -m tests.galera_cluster`` (as root or as an ordinary user) gives
    the benchmark a cluster to run on (docs/scaling.md).
    """
    import select
    import sys

    cluster = start_cluster()
    try:
        _create_database(cluster)
        print(cluster.urls(DATABASE), flush=True)
        select.select([sys.stdin], [], [], 3600)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
