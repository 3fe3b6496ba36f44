"""The benchmark's raw-driver arms: what they read, and that each pull is one round trip.

Each arm is one hand-written driver query per pull (bench/instrument/raw*.py); the benchmark's
"service overhead" target divides the service's pull_latest by it, so it must read what the
service reads (the same seqs, the viewer's floors applied) and never cost more than one
round trip. Counts only, never times.
"""

from __future__ import annotations

from typing import Any

import pytest

from imbucket.app import MessageService
from imbucket.bench.instrument.probe import Probe
from imbucket.bench.instrument.raw import raw_arm
from imbucket.domain.layout import BucketLayout
from imbucket.domain.projection import MessageView
from imbucket.testing.factories import CONV, messages
from tests.contract.conftest import ROWS

# Every uncached store of the SQL engines and MongoDB has an arm (the spill row is sql-bucket).
ARMED = [
    pytest.param(row.fixture, id=row.id)
    for row in ROWS
    if row.id.startswith(("sql-row", "sql-bucket", "mongo-")) and "+" not in row.id
]
pytestmark = pytest.mark.parametrize("backend_config", ARMED, indirect=True)


def seqs_of(found: list[Any]) -> list[int]:
    """The message seqs in an arm's answer, ascending, whatever shape its driver returns."""
    seqs: list[int] = []
    for item in found:
        if (
            isinstance(item, dict) and "low" in item
        ):  # an SQL bucket: its wanted slots, either encoding
            first = BucketLayout().seq_at(item["doc_id"], item["low"])
            seqs += [
                first + n for n, slot in enumerate(item["msgs"]) if slot.get("m") or slot.get("msg")
            ]
        elif isinstance(item, dict) and "msgs" in item:  # a mongo bucket: OpenIM's slots
            seqs += [slot["msg"]["seq"] for slot in item["msgs"] if slot.get("msg")]
        elif isinstance(item, dict):  # a mongo-row document
            seqs.append(item["_id"]["s"])
        else:  # an sql-row row
            seqs.append(item.seq)
    return sorted(seqs)


def visible(service: MessageService, viewer: str, count: int) -> list[int]:
    return [e.seq for e in service.pull_latest(CONV, viewer, count) if isinstance(e, MessageView)]


@pytest.mark.parametrize("count", [5, 20, 40], ids=["one-bucket", "20", "two-buckets"])
def test_the_arm_reads_what_pull_latest_reads(
    probed: tuple[Probe, MessageService], count: int
) -> None:
    _, service = probed
    arm = raw_arm(service.store)
    assert arm is not None
    service.ingest(CONV, messages(1, 110))
    assert seqs_of(arm.pull_latest(CONV, "bob", count)) == visible(service, "bob", count)
    assert seqs_of(arm.pull_latest("nobody-here", "bob", count)) == []


def test_the_arm_applies_the_viewers_floors(probed: tuple[Probe, MessageService]) -> None:
    _, service = probed
    arm = raw_arm(service.store)
    assert arm is not None
    service.ingest(CONV, messages(1, 95))
    service.clear_history(CONV, "bob")  # bob's floor: 96
    service.ingest(CONV, messages(96, 103))
    assert seqs_of(arm.pull_latest(CONV, "bob", 20)) == visible(service, "bob", 20)
    assert seqs_of(arm.pull_latest(CONV, "bob", 20)) == list(range(96, 104))
    assert seqs_of(arm.pull_latest(CONV, "carol", 20)) == list(range(84, 104))


def test_a_pull_on_the_arm_is_one_round_trip(probed: tuple[Probe, MessageService]) -> None:
    probe, service = probed
    arm = raw_arm(service.store)
    assert arm is not None
    service.ingest(CONV, messages(1, 110))
    arm.pull_latest(CONV, "bob", 20)  # any lazy engine setup
    for count in (20, 40):  # one bucket, then two
        trips = probe.count(lambda count=count: arm.pull_latest(CONV, "bob", count))
        assert (trips.total, trips.writes) == (1, 0), trips
