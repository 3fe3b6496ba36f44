"""A Galera node killed, and a Galera node cut off behind a proxy, while clients go on.

Guarantee: through either fault every pull is one the reference model gives: an
acknowledged write is visible to every pull that starts after it, on whichever node the pull
reads (causal reads), nothing acknowledged is lost, and a call the fault cut took effect once
or not at all. No cache: every pull reads the store, so no staleness is allowed.

The killed node is one of a cluster of the test's own (stopped after it); the clients' URLs
name every node, so their connections go round-robin and skip the dead one. The proxy test
runs on the session's cluster: one writer reaches one node through a proxy alone, another
through the proxy and a second node; the proxy drops every connection and refuses new ones
for a while, then forwards again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from imbucket.testing.histories import Recorder, run_threads
from tests.galera_cluster import GaleraCluster, start_cluster
from tests.histories.rig import Config, config, finish, run, workload
from tests.proxy import TcpProxy
from tests.sql_servers import mariadb_database

pytestmark = pytest.mark.histories
FAULT_AFTER = 150  # calls of all clients before the fault
CUT_SECONDS = 3.0  # how long the proxy refuses service
BACKEND = "sql-bucket"


@pytest.fixture
def own_cluster() -> Iterator[GaleraCluster]:
    """A cluster of this test's own: killing a node must not disturb other tests."""
    cluster = start_cluster()
    yield cluster
    cluster.stop()


def _store(url: str) -> Config:
    return config({"backend": BACKEND, "url": url})


def test_a_galera_node_killed(own_cluster: GaleraCluster) -> None:
    work = workload(seed=8)
    victim = own_cluster.nodes[-1]
    with run() as history:
        created = mariadb_database(own_cluster.url(own_cluster.nodes[0]))
        database = history.stack.enter_context(created).rsplit("/", 1)[1]
        on = [_store(own_cluster.urls(database, first)) for first in range(3)]
        history.service(on[0])  # the tables, before the clients open theirs
        clients = [history.client(f"reader-{i}", on[i], writer=False) for i in (1, 2)]
        clients += [history.client(f"writer-{i}", on[i], writer=True) for i in (0, 1, 2)]

        def kill(recorder: Recorder = history.recorder) -> None:
            assert recorder.wait_for(FAULT_AFTER, timeout=30)
            own_cluster.kill(victim)
            own_cluster.wait_synced(2, timeout=30)

        run_threads(clients, work, history.recorder, kill)
        fault = f"galera node {victim.index} SIGKILLed after {FAULT_AFTER} calls"
        finish(history, work, _store(own_cluster.url(own_cluster.nodes[0], database)), fault)


def test_a_galera_node_cut_off_behind_a_proxy(galera_cluster: GaleraCluster) -> None:
    work = workload(seed=9)
    first, second = galera_cluster.nodes[:2]
    with run() as history:
        database = history.stack.enter_context(mariadb_database(galera_cluster.url(first)))
        database = database.rsplit("/", 1)[1]
        direct = _store(galera_cluster.url(first, database))
        history.service(direct)  # the tables, before the clients open theirs
        proxy = TcpProxy(galera_cluster.url(first), first.port)
        history.stack.callback(proxy.close)
        alone = _store(f"mysql+pymysql://root@127.0.0.1:{proxy.port}/{database}")
        both = _store(
            f"mysql+pymysql://root@/{database}?host=127.0.0.1:{proxy.port}&host={second.address}"
        )
        clients = [
            history.client("reader-1", direct, writer=False),
            history.client("reader-2", _store(galera_cluster.url(second, database)), False),
            history.client("writer-direct", direct, writer=True),
            history.client("writer-alone", alone, writer=True),
            history.client("writer-both", both, writer=True),
        ]

        def cut(recorder: Recorder = history.recorder) -> None:
            assert recorder.wait_for(FAULT_AFTER, timeout=30)
            proxy.cut()
            time.sleep(CUT_SECONDS)
            proxy.restore()

        run_threads(clients, work, history.recorder, cut)
        fault = (
            f"node {first.index} cut off behind a proxy after {FAULT_AFTER} calls for "
            f"{CUT_SECONDS:g} s, from writer-alone (only that node) and writer-both (and another)"
        )
        finish(history, work, direct, fault)
