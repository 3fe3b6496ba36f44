"""A Galera node SIGKILLed while writers send and tag through every node: nothing acknowledged
is lost, the service keeps answering through the survivors, and the node rejoins.

The test starts a 3-node cluster of its own (tests/galera_cluster.py). Three writer threads
(tests/distributed/load.py), each with a service whose URL names every node (connections go
round-robin over them), send and tag until each has some acknowledgements; then one node is
killed, and they go on until each has as many again. Then:

- every acknowledged message and tag is there on each survivor, read through it alone;
- every writer was acknowledged after the kill (the service kept answering);
- the killed node restarts at the position ``--wsrep-recover`` finds, catches up by IST, and
  shows exactly what a survivor shows (the same pulls, read through it alone).

Counts are asserted, never times; the times are printed for the report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from imbucket.app import MessageService, open_service
from imbucket.testing.rows import store_config
from tests.distributed.load import VIEWER, Writer, missing_on, through_fault
from tests.galera_cluster import GaleraCluster, start_cluster
from tests.sql_servers import mariadb_database

WRITERS = 3
ACKS_BEFORE = 20  # per writer, before the kill
ACKS_AFTER = 20  # per writer, after it
WAIT_SECONDS = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[GaleraCluster]:
    """A cluster of this module's own: killing a node must not disturb other tests."""
    galera = start_cluster()
    yield galera
    galera.stop()


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_a_killed_node_loses_nothing_acknowledged_and_rejoins(
    cluster: GaleraCluster, backend: str
) -> None:
    victim = cluster.nodes[-1]
    with mariadb_database(cluster.url(cluster.nodes[0])) as url:
        database = url.rsplit("/", 1)[1]

        opening = threading.Lock()

        def opener(first: int) -> MessageService:
            # One open at a time: GET_LOCK, which serialises opens, is local to a node.
            with opening:
                return open_service(store_config(backend, cluster.urls(database, first)))

        open_service(store_config(backend, cluster.urls(database))).close()  # the tables
        writers = [Writer(f"g{i}") for i in range(WRITERS)]
        fault = through_fault(
            writers, opener, lambda: cluster.kill(victim), (ACKS_BEFORE, ACKS_AFTER), WAIT_SECONDS
        )
        assert fault.resumed and fault.first_ack is not None, [w.failures[-3:] for w in writers]
        before, first_ack = fault.before, fault.first_ack

        for node in cluster.alive_nodes():
            with _service(backend, cluster.url(node, database)) as service:
                for writer in writers:
                    assert missing_on(service, writer) == []

        started = time.monotonic()
        position = cluster.rejoin(victim)
        cluster.wait_synced(3)
        rejoined = time.monotonic() - started
        assert cluster.ist_used(victim)
        with (
            _service(backend, cluster.url(victim, database)) as back,
            _service(backend, cluster.url(cluster.nodes[0], database)) as survivor,
        ):
            for writer in writers:
                assert missing_on(back, writer) == []
                seqs = list(range(1, max(writer.sent) + 1))
                for viewer in (VIEWER, "carol"):
                    expected = survivor.pull(writer.conversation, viewer, seqs)
                    assert back.pull(writer.conversation, viewer, seqs) == expected
    failed = sum(len(w.failures) for w in writers)
    print(
        f"\ngalera {backend}: {sum(before)} acks before the kill, "
        f"{sum(len(w.sent) for w in writers) - sum(before)} after; {failed} failed calls; "
        f"first ack {first_ack:.2f} s after the kill; rejoined at {position} "
        f"by IST in {rejoined:.1f} s"
    )


class _service:
    """A service on one URL, closed on exit."""

    def __init__(self, backend: str, url: str) -> None:
        self.service = open_service(store_config(backend, url))

    def __enter__(self) -> MessageService:
        return self.service

    def __exit__(self, *_: object) -> None:
        self.service.close()
