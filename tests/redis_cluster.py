"""A Redis Cluster of the test run's own: 3 masters, 3 replicas, on free loopback ports.

Started once per session by the ``redis_cluster`` fixture (tests/conftest.py) with the
``redis-server`` and ``redis-cli`` found on PATH, in a temporary directory, without
persistence; stopped (every process killed) at the end. Every wait is bounded.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.private_servers import free_ports

NODES = 6
# A node silent this long (ms) is failed and its replica promoted (Redis's default: 15 s).
# The shared session cluster uses a margin against a loaded machine; the failover test, which
# kills a master on purpose, a short one.
NODE_TIMEOUT_MS = 5000
FAST_NODE_TIMEOUT_MS = 1000
START_SECONDS = 30.0
# A node's cluster bus listens this far above its client port.
BUS_PORT_OFFSET = 10000
# Another process may take a picked port before the node binds it: start afresh this often.
START_ATTEMPTS = 3


def _node_ports(count: int) -> list[int]:
    """count distinct free loopback ports whose +10000 cluster bus ports are free too.

    The ports are picked together, held open at once, so two nodes never get the same one.
    """
    for _ in range(100):
        ports = free_ports(count)
        buses = {port + BUS_PORT_OFFSET for port in ports}
        if not buses & set(ports) and all(bus < 65536 and _free(bus) for bus in buses):
            return ports
    raise RuntimeError(f"no {count} free port pairs for the cluster's nodes")


def _free(port: int) -> bool:
    try:
        with socket.create_server(("127.0.0.1", port)):
            return True
    except OSError:
        return False


def _cli(port: int, *args: str, timeout: float = 10.0) -> str:
    result = subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return result.stdout


@dataclass
class ClusterNode:
    """One redis-server process of the cluster."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class RedisClusterProcesses:
    """The cluster's processes; ``url`` names one of its nodes."""

    directory: Path
    node_timeout_ms: int = NODE_TIMEOUT_MS
    nodes: list[ClusterNode] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://{self.alive_nodes()[0].address}"

    def alive_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.alive()]

    def start(self) -> None:
        """Start the six servers, join them, wait until every slot is served."""
        for port in _node_ports(NODES):
            self.nodes.append(ClusterNode(port, self._spawn(port)))
        for node in self.nodes:
            self._wait(lambda n=node: self._answers(n), f"{node.address} answering")
        result = subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(node.address for node in self.nodes),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {result.stdout[-2000:]}")
        self.wait_ok()

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        node_dir = self.directory / str(port)
        node_dir.mkdir()
        return subprocess.Popen(
            [
                "redis-server",
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(node_dir / "nodes.conf"),
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--dir", str(node_dir),
                "--save", "",
                "--appendonly", "no",
                "--logfile", str(node_dir / "redis.log"),
                # Replicas sync at once, and one may always take over its dead master.
                "--repl-diskless-sync-delay", "0",
                "--cluster-replica-validity-factor", "0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    @staticmethod
    def _answers(node: ClusterNode) -> bool:
        """True once the node answers PING; raises at once if its process has ended."""
        if not node.alive():
            raise RuntimeError(f"redis cluster: the node on {node.address} exited while starting")
        return _cli(node.port, "ping").strip() == "PONG"

    def healthy(self, replicas: int) -> bool:
        """Every live node says cluster_state:ok and that live masters serve all 16384 slots;
        at least ``replicas`` replicas are in sync."""
        live = {node.port for node in self.alive_nodes()}
        for port in live:
            info = _cli(port, "cluster", "info")
            if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                return False
            if not {master.port for master, _, _ in self._slot_masters(port)} <= live:
                return False
        replication = [_cli(m.port, "info", "replication") for m in self.masters()]
        return sum(info.count("state=online") for info in replication) >= replicas

    def wait_ok(self, replicas: int = NODES // 2, timeout: float = START_SECONDS) -> float:
        """Wait until healthy with that many working replicas; returns the seconds waited."""
        return self._wait(lambda: self.healthy(replicas), "cluster_state:ok", timeout)

    def masters(self) -> list[ClusterNode]:
        """The live nodes that are masters now."""
        return [n for n in self.alive_nodes() if "role:master" in _cli(n.port, "info")]

    def master_of(self, slot: int) -> ClusterNode:
        """The node that serves slot, as the first live node says."""
        for master, start, end in self._slot_masters(self.alive_nodes()[0].port):
            if start <= slot <= end:
                return master
        raise LookupError(f"slot {slot} is not served")

    def _slot_masters(self, port: int) -> list[tuple[ClusterNode, int, int]]:
        """(master, first slot, last slot) of each slot range, as the node at port says."""
        client = redis.Redis(port=port, socket_timeout=5)
        try:
            ranges = client.execute_command("CLUSTER SLOTS")
        finally:
            client.close()
        # Each range: first, last, then [ip, port, id] of its master and of each replica.
        return [(self.node_of(int(master[1])), start, end) for start, end, master, *_ in ranges]

    def node_of(self, port: int) -> ClusterNode:
        return next(node for node in self.nodes if node.port == port)

    def kill(self, node: ClusterNode) -> None:
        """SIGKILL one node (no shutdown, no goodbye to the cluster)."""
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(10)

    def stop(self) -> None:
        """Kill every process and remove the directory."""
        for node in self.nodes:
            if node.alive():
                node.process.kill()
                node.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    @staticmethod
    def _wait(ready: object, what: str, timeout: float = START_SECONDS) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if ready():  # type: ignore[operator]
                return time.monotonic() - started
            time.sleep(0.1)
        raise RuntimeError(f"redis cluster: {what} not reached within {timeout} s")


def start_cluster(node_timeout_ms: int = NODE_TIMEOUT_MS) -> RedisClusterProcesses:
    """A started cluster; skips without redis-server.

    A try that fails is stopped and started afresh on new ports, up to START_ATTEMPTS tries.
    """
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-cluster: redis-server and redis-cli are not on PATH")
    for _ in range(START_ATTEMPTS - 1):
        try:
            return _started(node_timeout_ms)
        except RuntimeError:
            continue
    return _started(node_timeout_ms)


def _started(node_timeout_ms: int) -> RedisClusterProcesses:
    """One try at a cluster in a new directory, stopped again if it fails."""
    directory = Path(tempfile.mkdtemp(prefix="imbucket-redis-cluster-"))
    cluster = RedisClusterProcesses(directory, node_timeout_ms)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
