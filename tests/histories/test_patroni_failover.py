"""The Patroni primary killed while clients go on: Patroni promotes the synchronous standby.

Guarantee (synchronous_mode: a commit is acknowledged only once the synchronous standby has
it; docs/scaling.md): through the failover every pull is one the reference model gives, and
nothing acknowledged before the kill is lost on the promoted primary. Every client's URL
names every member with ``target_session_attrs=read-write`` and sets
``store.reconnect_timeout_seconds``, so a call in flight at the kill is retried on the new
primary, or ends with its outcome unknown. No cache: no staleness is allowed. The cluster
is the test's own (stopped after it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from imbucket.testing.histories import Recorder, run_threads
from tests.histories.rig import config, finish, run, workload
from tests.patroni_cluster import PatroniCluster, start_cluster

pytestmark = pytest.mark.histories
KILL_AFTER = 150  # calls of all clients before the primary's postmaster is killed
RECONNECT_SECONDS = 20.0  # longer than a promotion takes
SECONDS = 14.0  # each client's calls end by then: the failover fits in it
FAILOVER_SECONDS = 60.0


@pytest.fixture
def own_cluster() -> Iterator[PatroniCluster]:
    """A cluster of this test's own: killing the primary must not disturb other tests."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


def test_the_patroni_primary_killed(own_cluster: PatroniCluster) -> None:
    work = workload(seed=10, seconds=SECONDS)
    promoted: list[str] = []
    with run() as history:
        # The cluster's own database, public schema: the cluster goes with the test, and a
        # scratch schema's cleanup would dial the killed primary.
        store = {"backend": "sql-bucket", "url": own_cluster.url}
        settings = config({**store, "reconnect_timeout_seconds": RECONNECT_SECONDS})
        history.service(settings)  # the tables, before the clients open theirs
        clients = [history.client(f"reader-{i}", settings, writer=False) for i in (1, 2)]
        clients += [history.client(f"writer-{i}", settings, writer=True) for i in (1, 2)]
        old = own_cluster.leader()

        def kill(recorder: Recorder = history.recorder) -> None:
            assert recorder.wait_for(KILL_AFTER, timeout=30)
            killed = time.monotonic()
            own_cluster.kill_postmaster(old)
            own_cluster.wait_leader_other_than(old, FAILOVER_SECONDS)
            promoted.append(f"a standby promoted {time.monotonic() - killed:.1f} s after it")

        run_threads(clients, work, history.recorder, kill)
        fault = f"the primary ({old.name}) SIGKILLed after {KILL_AFTER} calls; {promoted[0]}"
        finish(history, work, settings, fault)
