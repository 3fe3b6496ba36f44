"""A Redis Cluster master SIGKILLed while cached writers and readers go on.

Guarantee: through the failover (the dead master's conversations skip the cache, its replica
is promoted, the cache serves again) every pull is one the reference model gives, acknowledged
writes visible within the cache's staleness bound. The send conversation lives on the master
that is killed, the ingest one on another. The cluster is the test's own (it kills a master),
with a short node timeout, so the session's shared cluster is left alone.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from redis.cluster import key_slot

from imbucket.testing.histories import Recorder, Workload, run_threads
from tests.histories.rig import OPERATIONS, SECONDS, config, finish, run
from tests.redis_cluster import FAST_NODE_TIMEOUT_MS, RedisClusterProcesses, start_cluster
from tests.sql_servers import postgres_schema, postgres_server

pytestmark = pytest.mark.histories
KILL_AFTER = 150  # calls of all clients before the master is killed
FAILOVER_SECONDS = 30.0


@pytest.fixture
def own_cluster() -> Iterator[RedisClusterProcesses]:
    cluster = start_cluster(FAST_NODE_TIMEOUT_MS)
    yield cluster
    cluster.stop()


def _on_masters(cluster: RedisClusterProcesses) -> tuple[Workload, int]:
    """Conversations on two different masters, and the port of the send conversation's."""
    name = uuid.uuid4().hex[:8]

    def master(conversation_id: str) -> int:
        return cluster.master_of(key_slot(conversation_id.encode())).port

    send = f"si_h_{name}"
    ingest = next(
        conversation_id
        for conversation_id in (f"si_i_{name}_{i}" for i in range(100))
        if master(conversation_id) != master(send)
    )
    return Workload(send, ingest, OPERATIONS, SECONDS, seed=6), master(send)


def test_a_redis_cluster_master_killed(own_cluster: RedisClusterProcesses) -> None:
    work, victim = _on_masters(own_cluster)
    failover: list[str] = []
    with (
        postgres_schema(postgres_server()) as url,
        run() as history,
    ):
        # No scratch prefix to clean up: the cluster is the test's own and is stopped after it,
        # and the node a cleanup would dial may be the one killed.
        prefix = f"imbucket-history-{uuid.uuid4().hex}"
        cache = {"backend": "redis-cluster", "url": own_cluster.url, "key_prefix": prefix}
        settings = config({"backend": "sql-bucket", "url": url}, cache)
        clients = [history.client(f"reader-{i}", settings, writer=False) for i in (1, 2)]
        clients += [history.client(f"writer-{i}", settings, writer=True) for i in (1, 2)]

        def kill(recorder: Recorder = history.recorder) -> None:
            assert recorder.wait_for(KILL_AFTER, timeout=30)
            killed = time.monotonic()
            own_cluster.kill(own_cluster.node_of(victim))
            own_cluster.wait_ok(replicas=2, timeout=FAILOVER_SECONDS)
            failover.append(f"replica promoted {time.monotonic() - killed:.1f} s after the kill")

        run_threads(clients, work, history.recorder, kill)
        fault = f"the master of {work.conversation_id} SIGKILLed after {KILL_AFTER} calls"
        # The final pulls open a new client: it must name a node that is still alive.
        cache["url"] = own_cluster.url
        settings = config({"backend": "sql-bucket", "url": url}, cache)
        finish(history, work, settings, f"{fault}; {failover[0]}")
