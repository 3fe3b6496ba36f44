"""Writer processes SIGKILLed mid send while cached readers pull.

Guarantee: a send whose process was killed in it took effect once or not at all: its
message is at one seq or none, every acknowledged write stays visible, and every pull is one
the reference model gives. The writers are processes of their own (multiprocessing, forkserver),
each logging its calls to a file before making them, so that the call a kill interrupted is
in the history as unknown; a new writer process takes over after each kill.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from imbucket.testing.histories import Operation, Workload, read_log, run_threads
from tests.histories.rig import Config, config, finish, run, staleness, workload
from tests.histories.writer_process import (
    AFTER_INSERT,
    BEFORE_INSERT,
    stalled,
    write,
)
from tests.redis_server import redis_prefix, redis_url
from tests.sql_servers import postgres_schema, postgres_server

pytestmark = pytest.mark.histories
STALL_AT = 3  # the send a killed writer stalls in (its inserts, counted from 1)
RANDOM_KILL_AFTER = 12  # logged calls before the writer killed at no chosen point
READER_PAUSE = 0.02  # seconds between two pulls: the writer processes need the CPU
WAIT_SECONDS = 30.0
# What a writer's open_service imports on its first open, imported once by the fork server.
PRELOAD = (
    "imbucket.adapters.redis_cache",
    "imbucket.adapters.sql.row",
    "imbucket.app.backends",
    "imbucket.app.container",
    "psycopg",
    "sqlalchemy.dialects.postgresql.psycopg",
)
WRITER = Workload("", "", operations=60, seconds=4.0)


@pytest.fixture
def cached_rows() -> Iterator[Config]:
    """sql-row on a PostgreSQL schema of the test's own, with the Redis cache."""
    url = redis_url()
    with postgres_schema(postgres_server()) as store_url, redis_prefix(url) as prefix:
        store = {"backend": "sql-row", "url": store_url}
        yield config(store, {"backend": "redis", "url": url, "key_prefix": prefix})


def _start(settings: Config, name: str, work: Workload, log: Path, stall: str, broken: bool) -> Any:
    # Forked from a server that has imported imbucket once: each writer starts in moments,
    # and nothing of this process (its threads, its connections) is copied into it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([write.__module__, *PRELOAD])
    process = context.Process(
        target=write,
        args=(settings, name, work, str(log), stall, STALL_AT, broken, staleness(settings)),
        daemon=True,
    )
    process.start()
    return process


def _wait(ready: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} not within {WAIT_SECONDS} s"
        time.sleep(0.005)


def _ready(log: Path, stall: str) -> bool:
    """Whether the writer logging to log is where it is to be killed."""
    return stalled(str(log)) if stall else _lines(log) >= RANDOM_KILL_AFTER


def _lines(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _writers(settings: Config, work: Workload, logs: Path, kills: list[str], broken: bool) -> None:
    """One writer stalled before its insert, one after, one killed anywhere, one that ends."""
    plan = [*(("kill", stall) for stall in (BEFORE_INSERT, AFTER_INSERT, "")), ("end", "")]
    for number, (fate, stall) in enumerate(plan, 1):
        log = logs / f"writer-{number}.log"
        process = _start(settings, f"writer-{number}", work, log, stall, broken)
        try:
            if fate == "kill":
                _wait(partial(_ready, log, stall), f"writer-{number} {stall or 'running'}")
                os.kill(process.pid, signal.SIGKILL)
                kills.append(f"writer-{number} {stall or 'at call ' + str(_lines(log))}")
            process.join(WAIT_SECONDS + work.seconds)
            assert not process.is_alive(), f"writer-{number} did not end"
        finally:
            if process.is_alive():  # the test failed: leave no writer behind
                process.kill()
                process.join(WAIT_SECONDS)


def _history(logs: Path) -> list[Operation]:
    return [op for log in sorted(logs.glob("*.log")) for op in read_log(str(log))]


@pytest.mark.parametrize("broken", [False, True], ids=["intact", "invalidation-switched-off"])
def test_writer_processes_killed_mid_send(
    cached_rows: Config, tmp_path: Path, broken: bool
) -> None:
    work = workload(seed=4, seconds=120.0, operations=100_000)
    writer_work = Workload(work.conversation_id, work.ingest_id, WRITER.operations, WRITER.seconds)
    kills: list[str] = []
    with run() as history:
        readers = [
            history.client(f"reader-{i}", cached_rows, writer=False, pause=READER_PAUSE)
            for i in (1, 2)
        ]
        run_threads(
            readers,
            work,
            history.recorder,
            lambda: _writers(cached_rows, writer_work, tmp_path, kills, broken),
            until_fault_ends=True,
        )
        fault = "SIGKILL: " + "; ".join(kills) + (" (invalidation switched off)" if broken else "")
        finish(history, work, cached_rows, fault, _history(tmp_path), expect_anomalies=broken)
