"""Stores opened at the same moment on every node of a Galera cluster all open.

The schema lock (GET_LOCK) is local to a node, so opens on different nodes go through the
schema checks at once: each must open (no replicated DDL for an existing store, a bounded
retry for a lost race), and the stores must share one seq counter afterwards. The tables are
created by one open first, as a deployment does before starting its workers.
"""

from __future__ import annotations

import pytest

from imbucket.app import MessageService, open_service
from imbucket.testing.concurrency import run_together
from imbucket.testing.factories import draft
from imbucket.testing.rows import store_config
from tests.galera_cluster import GaleraCluster
from tests.sql_servers import mariadb_database

OPENS = 16


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_stores_opened_at_once_on_every_node_all_open(
    galera_cluster: GaleraCluster, backend: str
) -> None:
    nodes = len(galera_cluster.nodes)
    with mariadb_database(galera_cluster.url(galera_cluster.nodes[0])) as url:
        database = url.rsplit("/", 1)[1]
        open_service(store_config(backend, galera_cluster.urls(database))).close()

        def opened(index: int) -> MessageService | Exception:
            # Each store's first connection goes to another node than its neighbour's.
            config = store_config(backend, galera_cluster.urls(database, index % nodes))
            try:
                return open_service(config)
            except Exception as error:  # reported below, after the others are closed
                return error

        outcomes = run_together(OPENS, opened)
        services = [outcome for outcome in outcomes if isinstance(outcome, MessageService)]
        try:
            assert [o for o in outcomes if not isinstance(o, MessageService)] == []
            sent = [
                service.send("sg_opened", [draft(n)])[0].seq for n, service in enumerate(services)
            ]
            assert sorted(sent) == list(range(1, OPENS + 1))
            assert services[-1].stats().messages == OPENS
        finally:
            for service in services:
                service.close()
