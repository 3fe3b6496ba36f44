"""What one node of a Galera cluster acknowledged holds on every node, under races too.

Galera replicates synchronously but applies asynchronously: a node may acknowledge a read
before it has applied a commit another node already acknowledged, and a node re-runs an
autocommitted statement that lost certification by itself, after its RETURNING rows were
already sent. The store's sessions ask for causal reads and for no server-side retry
(docs/sql.md, "Several servers"); these tests fail without either.

They run on the session's cluster (tests/galera_cluster.py), each service on one node alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql
import pytest

from imbucket import MessageView
from imbucket.app import MessageService, open_service
from imbucket.domain.errors import StoreUnavailable
from imbucket.testing.concurrency import run_together
from imbucket.testing.factories import messages
from imbucket.testing.rows import store_config
from tests.galera_cluster import GaleraCluster, GaleraNode
from tests.sql_servers import mariadb_database

BACKENDS = ["sql-row", "sql-bucket"]
CONVERSATION = "sg_galera"
WRITERS = 6
ROUNDS = 3
PAUSE_SECONDS = 1.0  # how long the read is given to answer from the paused node


@contextmanager
def _service(backend: str, url: str) -> Iterator[MessageService]:
    service = open_service(store_config(backend, url))
    try:
        yield service
    finally:
        service.close()


@contextmanager
def _on_two_nodes(
    cluster: GaleraCluster, backend: str
) -> Iterator[tuple[MessageService, MessageService]]:
    """Services on the first two nodes, over one new database."""
    first, second = cluster.nodes[:2]
    with mariadb_database(cluster.url(first)) as url:
        database = url.rsplit("/", 1)[1]
        with (
            _service(backend, cluster.url(first, database)) as one,
            _service(backend, cluster.url(second, database)) as two,
        ):
            yield one, two


@contextmanager
def _applier_paused(node: GaleraNode) -> Iterator[None]:
    """The node applies no replicated commit until the block ends (FTWRL desyncs it)."""
    connection = pymysql.connect(host="127.0.0.1", port=node.port, user="root", autocommit=True)
    try:
        with connection.cursor() as cursor:
            cursor.execute("FLUSH TABLES WITH READ LOCK")
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("UNLOCK TABLES")
        connection.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pull_on_another_node_sees_what_the_first_acknowledged(
    galera_cluster: GaleraCluster, backend: str
) -> None:
    second = galera_cluster.nodes[1]
    with _on_two_nodes(galera_cluster, backend) as (writer, reader):
        writer.ingest(CONVERSATION, messages(1, 3, CONVERSATION))
        assert reader.max_seq(CONVERSATION) == 3  # the reader's connection is open
        pulled: list[int] = []
        with _applier_paused(second):
            writer.ingest(CONVERSATION, messages(4, 6, CONVERSATION))
            reading = threading.Thread(
                target=lambda: pulled.extend(
                    m.seq
                    for m in reader.pull(CONVERSATION, "alice", list(range(1, 7)))
                    if isinstance(m, MessageView)
                )
            )
            reading.start()
            reading.join(PAUSE_SECONDS)  # without causal reads it has answered by now
        reading.join()
        assert pulled == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_ingest_on_every_node_reports_each_message_once(
    galera_cluster: GaleraCluster, backend: str
) -> None:
    with mariadb_database(galera_cluster.url(galera_cluster.nodes[0])) as url:
        database = url.rsplit("/", 1)[1]
        nodes = galera_cluster.nodes
        services = [
            open_service(store_config(backend, galera_cluster.url(nodes[n % len(nodes)], database)))
            for n in range(WRITERS)
        ]
        try:
            for round_ in range(ROUNDS):
                inserted = _ingested_together(services, f"{CONVERSATION}_{round_}", round_)
                assert sorted(inserted) == list(range(1, 301)), f"round {round_}"
        finally:
            for service in services:
                service.close()


def _ingested_together(services: list[MessageService], conversation: str, shift: int) -> list[int]:
    """Each service ingests overlapping shares of seqs 1..300 at once; every seq reported new."""
    batch = messages(1, 300, conversation)

    def ingest(index: int) -> list[int]:
        start = (index * 37 + shift * 11) % 200
        chunks = (batch[start : start + 100], batch[:100], batch[200:], batch[100:200])
        service = services[index]
        return [seq for chunk in chunks for seq in service.ingest(conversation, chunk).inserted]

    return [seq for share in run_together(len(services), ingest) for seq in share]


MARKERS = 4  # threads, two per node
MARKS = 120  # mark_reads per thread


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_mark_reads_on_two_nodes_succeed_or_fail_typed(
    galera_cluster: GaleraCluster, backend: str
) -> None:
    # A node aborts a local statement that holds a lock a replicated write needs; aborted
    # while sending its RETURNING row, the reply can be malformed. The store must take that
    # as a lost reply (tried again), never leak the driver's parse error.
    with _on_two_nodes(galera_cluster, backend) as (one, two):
        one.ingest(CONVERSATION, messages(1, 40, CONVERSATION))
        assert two.max_seq(CONVERSATION) == 40

        def mark(index: int) -> list[str]:
            service, failed = (one, two)[index % 2], []
            for n in range(MARKS):
                seq, reader = 1 + (n * 7 + index) % 40, f"r{index}_{n % 10}"
                try:
                    service.mark_read(CONVERSATION, [seq], reader)
                except StoreUnavailable:
                    pass
                except Exception as error:  # what the test is for
                    failed.append(f"{type(error).__name__}: {error}")
            return failed

        assert [f for failed in run_together(MARKERS, mark) for f in failed] == []
