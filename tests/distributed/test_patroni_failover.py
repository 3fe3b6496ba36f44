"""The PostgreSQL primary killed under sends: after Patroni promotes the synchronous standby,
nothing acknowledged is missing, the service reconnects by itself, and each send that failed
settles by the lost-reply rules.

The test starts a cluster of its own (tests/patroni_cluster.py: etcd, a primary, a sync
standby, a replica). Three writer threads (tests/distributed/load.py) send and tag through a
URL naming every member with ``target_session_attrs=read-write`` and
``store.reconnect_timeout_seconds`` set; the primary's postmaster is SIGKILLed once each has
some acknowledgements, and they go on until each has as many again on the new primary. Then:

- every acknowledged message and tag is on the new primary (synchronous replication: a commit
  is acknowledged only once the standby has it);
- the failover costs no call a StoreUnavailable (the reconnect bound outlasts it): a send in
  flight ends acknowledged or as OutcomeUnknown (its allocation's reply was lost);
- sending each failed draft again with its client_msg_id is acknowledged and leaves its
  content at exactly one seq (docs/sending.md, "A store that is unavailable").

Counts are asserted, never times; promotion and reconnect times are printed for the report.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imbucket.app import MessageService, open_service
from imbucket.testing.rows import store_config
from tests.distributed.load import Writer, missing_on, settle, through_fault
from tests.patroni_cluster import PatroniCluster, start_cluster
from tests.sql_servers import postgres_schema

WRITERS = 3
ACKS_BEFORE = 20  # per writer, before the kill
ACKS_AFTER = 20  # per writer, after it
RECONNECT_SECONDS = 20.0  # longer than a promotion takes here (a few seconds)
WAIT_SECONDS = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[PatroniCluster]:
    """A cluster of this module's own: killing the primary must not disturb other tests."""
    patroni = start_cluster()
    yield patroni
    patroni.stop()


def _open(backend: str, url: str) -> MessageService:
    config = store_config(backend, url)
    config["store"]["reconnect_timeout_seconds"] = RECONNECT_SECONDS
    return open_service(config)


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_a_killed_primary_loses_nothing_acknowledged(cluster: PatroniCluster, backend: str) -> None:
    cluster.wait_healthy()  # a sync standby to promote, also after the previous case
    with postgres_schema(cluster.url) as url:
        _open(backend, url).close()  # the tables
        writers = [Writer(f"p{i}") for i in range(WRITERS)]
        old, waited = cluster.leader(), []

        def kill_and_wait_for_promotion() -> None:
            cluster.kill_postmaster(old)
            waited.append(cluster.wait_leader_other_than(old, WAIT_SECONDS))

        fault = through_fault(
            writers,
            lambda _: _open(backend, url),
            kill_and_wait_for_promotion,
            (ACKS_BEFORE, ACKS_AFTER),
            WAIT_SECONDS,
        )
        assert fault.resumed and fault.first_ack is not None, [w.failures[-3:] for w in writers]
        before, first_ack, (promoted,) = fault.before, fault.first_ack, waited
        failures = [f for w in writers for f in w.failures]
        assert all(": OutcomeUnknown: " in f for f in failures), failures
        with _open(backend, url) as service:
            for writer in writers:
                assert missing_on(service, writer) == []
            for writer in writers:
                assert settle(service, writer) == []
                assert missing_on(service, writer) == []
    print(
        f"\npatroni {backend}: {sum(before)} acks before the kill, "
        f"{sum(len(w.sent) for w in writers) - sum(before)} after; {len(failures)} sends "
        f"failed (OutcomeUnknown), all settled by a retry; promoted {promoted:.2f} s after "
        f"the kill, first ack {first_ack:.2f} s after it"
    )
