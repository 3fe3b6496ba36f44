"""Contention: counters kept at the stores, and the bounded concurrent workloads (counts only)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from imbucket.adapters import contention as counters
from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.sql.engine import Database
from imbucket.app import open_service
from imbucket.bench import concurrency, contention
from imbucket.bench.results import BackendResult, from_json
from imbucket.domain.model import Message, Revoke, Role, Slot
from imbucket.testing.factories import CONV, message, messages
from tests.unit.test_bucket_state_machine import RecordingRepository


class RivalWriter(RecordingRepository):
    """Lets a rival store a message into one of our slots right before our third write."""

    def __init__(self, rival: Message) -> None:
        super().__init__()
        self.rival_message: Message | None = rival
        self.writes = 0

    def write_messages(self, doc_id: str, batch: Mapping[int, Message]) -> bool:
        self.writes += 1
        if self.writes == 3 and self.rival_message is not None:
            rival, self.rival_message = self.rival_message, None
            super().write_messages(doc_id, {rival.seq - 1: rival})
        return super().write_messages(doc_id, batch)


def test_a_lost_bucket_creation_race_is_counted_once() -> None:
    repository = RecordingRepository()
    store = BucketMessageStore(repository)
    repository.rival[f"{CONV}:0"] = {1: Slot(revoke=Revoke("o", Role.OWNER))}
    before = counters.snapshot()
    store.insert(CONV, messages(1, 3))
    assert counters.since(before) == {
        "bucket_create_lost": 1,
        "bucket_update_lost": 0,
        "row_upsert_lost": 0,
        "sql_retry": 0,
    }


def test_a_lost_conditional_update_is_counted_and_a_lone_writer_counts_nothing() -> None:
    repository = RivalWriter(message(2))
    store = BucketMessageStore(repository)
    before = counters.snapshot()
    store.insert(CONV, messages(1, 1))  # a lone writer: create the bucket, no conflict
    assert sum(counters.since(before).values()) == 0
    result = store.insert(CONV, messages(1, 3))  # 1 is a duplicate; the rival takes 2
    assert result.inserted == (3,) and result.duplicates == (1, 2)
    assert counters.since(before)["bucket_update_lost"] == 1
    assert counters.since(before)["bucket_create_lost"] == 0


def test_sql_statements_the_engine_undid_are_counted_per_retry() -> None:
    class Deadlock(Exception):
        sqlstate = "40P01"

    runs = 0

    def work(connection: object) -> str:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise OperationalError("UPDATE t", None, Deadlock("deadlock detected"))
        return "done"

    db = Database("sqlite://")
    try:
        before = counters.snapshot()
        assert db.run(work) == "done"
        assert counters.since(before)["sql_retry"] == 2
    finally:
        db.close()


def test_threads_in_a_hot_group_store_every_send_once_and_report_counts() -> None:
    plan = contention.Plan(ops=32, seconds=60.0)
    with open_service({"store": {"backend": "memory", "bucket_size": 5}}) as service:
        measured, background = contention.jobs("hot_group", 4, plan, "t1")
        result = contention.summarise(
            *contention.run_threads(service, measured, background),
            planned=32,
            scenario="hot_group",
            mode="threads",
            workers=4,
        )
        assert (result.ops, result.planned, result.writes, result.errors) == (
            32,
            32,
            32,
            0,
        )
        assert service.max_seq("sg_t1_hot") == 32
        entries = service.pull_range("sg_t1_hot", "w00", 1, 32)
        assert len({e.message.client_msg_id for e in entries}) == 32  # type: ignore[union-attr]
        assert set(result.conflicts) == set(counters.KINDS)


def test_many_groups_spread_the_writers_and_readers_read_while_writers_write() -> None:
    plan = contention.Plan(ops=16, seconds=60.0)
    with open_service({"store": {"backend": "memory"}}) as service:
        measured, background = contention.jobs("many_groups", 4, plan, "t2")
        assert len({job.conversations[0] for job in measured}) == 4
        contention.run_threads(service, measured, background)
        total = sum(service.max_seq(f"sg_t2_g{k:02d}") for k in range(contention.GROUPS))
        assert total == 16
        hot = contention.prime(service, "t3")
        assert service.max_seq(hot) == 20
        readers, writers = contention.jobs("readers", 2, plan, "t3", hot)
        assert [job.role for job in readers] == ["read", "read"]
        assert len(writers) == contention.READER_WRITERS
        mine, theirs, _ = contention.run_threads(service, readers, writers)
        assert len(mine.latencies) == 16 and mine.writes == 0 and not mine.errors
        assert theirs.writes == service.max_seq(hot) - 20  # every background send counted


def test_a_run_stops_at_its_count_or_its_deadline_after_its_first_operation() -> None:
    with open_service({"store": {"backend": "memory"}}) as service:
        job = contention.Job("send", 0, ("sg_t4_hot",), 5, 60.0, "t4")
        assert len(contention.work(service, job, lambda: None, lambda: False).latencies) == 5
        # Past its deadline, or stopped before it began: a worker still runs its first
        # operation, so the readers scenario always writes while it reads.
        job = contention.Job("send", 0, ("sg_t4_hot",), 1_000_000, -1.0, "t4")  # past
        tally = contention.work(service, job, lambda: None, lambda: False)
        assert (len(tally.latencies), tally.writes) == (1, 1)
        job = contention.Job("send", 0, ("sg_t4_hot",), 1_000_000, 60.0, "t4")
        tally = contention.work(service, job, lambda: None, lambda: True)
        assert (len(tally.latencies), tally.writes) == (1, 1)


def test_worker_processes_share_one_sqlite_file(tmp_path: Path) -> None:
    config = {"store": {"backend": "sql-bucket", "url": f"sqlite:///{tmp_path / 'c.sqlite'}"}}
    with open_service(config) as service:
        service.max_seq("sg_t5_hot")  # creates the tables before the workers open the file
        plan = contention.Plan(ops=12, seconds=60.0)
        measured, background = contention.jobs("hot_group", 3, plan, "t5")
        mine, _, _ = contention.run_processes(config, measured, background)
        assert (len(mine.latencies), mine.writes, dict(mine.errors)) == (12, 12, {})
        assert set(mine.conflicts) == set(counters.KINDS)
        assert service.max_seq("sg_t5_hot") == 12


def run(scenario: str, mode: str, workers: int, ops_per_s: float, conflicts: int) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "mode": mode,
        "workers": workers,
        "ops": 10,
        "planned": 10 if workers < 16 else 12,
        "writes": 10,
        "seconds": 0.01,
        "ops_per_s": ops_per_s,
        "latency_us": {"p50": 100, "p99": 900, "max": 1000},
        "conflicts": {"bucket_create_lost": conflicts, "sql_retry": 0},
        "conflicts_per_write": conflicts / 10,
        "errors": 0,
        "error_samples": {},
    }


def test_the_contention_reading_names_scaling_layouts_and_conflicts() -> None:
    def backend(store: str, layout: str, rates: tuple[float, ...], lost: int) -> dict[str, Any]:
        runs = [
            run("hot_group", "threads", n, r, lost) for n, r in zip((1, 4, 16), rates, strict=True)
        ]
        runs.append(run("hot_group", "processes", 16, rates[-1] / 2, lost))
        return {
            "label": f"{store}/sqlite",
            "store": store,
            "layout": layout,
            "family": "sql",
            "engine": "sqlite",
            "cache": "none",
            "status": "ok",
            "url": "",
            "version": "SQLite",
            "contention": runs,
        }

    results = [
        from_json(BackendResult, backend("sql-row", "row", (100.0, 150.0, 200.0), 0)),
        from_json(BackendResult, backend("sql-bucket", "bucket", (100.0, 200.0, 300.0), 1)),
    ]
    text = concurrency.reading(results, "hot_group")
    assert "sql-row/sqlite 2.0×" in text and "sql-bucket/sqlite 3.0×" in text
    assert "1.50× the row layout's" in text
    assert "4 bucket-creation races lost" in text
    rows = concurrency.rows(results, "hot_group")
    assert rows[1][:5] == ("sql-row/sqlite", "processes", "–", "–", "100")
    assert rows[0][-4:] == ("0", "0", "0", "0") and rows[2][-4:-1] == ("0.1", "0.1", "0.1")
    assert concurrency.stopped(results, "hot_group") == (
        "Stopped by the deadline (done/planned): sql-row/sqlite threads N=16 10/12; "
        "sql-row/sqlite processes N=16 10/12; sql-bucket/sqlite threads N=16 10/12; "
        "sql-bucket/sqlite processes N=16 10/12."
    )
    assert concurrency.headers(results)[2:5] == ("ops/s N=1", "ops/s N=4", "ops/s N=16")


@pytest.mark.parametrize("scenario", ["hot_group", "many_groups", "readers"])
def test_every_scenario_is_planned_for_every_worker_count(scenario: str) -> None:
    plan = contention.PLANS["small"]
    for workers in plan.workers:
        measured, _ = contention.jobs(scenario, workers, plan, "x")
        assert len(measured) == workers
        assert sum(job.count for job in measured) == plan.ops
