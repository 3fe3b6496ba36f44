"""Hand-made results (as results.json holds them) for report and compare tests.

The builders return the JSON form so that a test can change one number in place; ``typed``
reads it into the ``RunResults`` every benchmark stage takes.
"""

from __future__ import annotations

from typing import Any

from imbucket.bench.dataset import SCALES
from imbucket.bench.results import RunResults, to_json


def typed(data: dict[str, Any]) -> RunResults:
    """The results a JSON form stands for."""
    return RunResults.from_json(data)


WORKLOADS = (
    ("pull_latest", "pull_latest(20)"),
    ("raw_pull_latest", "raw pull_latest(20)"),
    ("clear_small", "clear_history (small)"),
    ("clear_largest", "clear_history (largest)"),
)


def run(p50: float, per_op: float = 2.0, writes: float = 0.0, max_trips: int = 2) -> dict[str, Any]:
    return {
        "ops": 10,
        "items": 10,
        "seconds": 0.01,
        "ops_per_s": 1000.0,
        "items_per_s": 1000.0,
        "latency_us": {"p50": p50, "p95": p50 * 2, "p99": p50 * 3, "max": p50 * 4, "mean": p50},
        "round_trips": {
            "per_op": per_op,
            "reads_per_op": per_op - writes,
            "writes_per_op": writes,
            "max": max_trips,
            "typical": max_trips,
            "distribution": {str(max_trips): 10},
            "by_driver": {"sql": per_op},
            "writes_by_driver": {"sql": writes} if writes else {},
        },
        "errors": 0,
        "error_samples": {},
        "histogram": "",
    }


def backend(
    store: str, engine: str, workloads: dict[str, dict[str, Any]], index_per_msg: float
) -> dict[str, Any]:
    layout = "row" if store.endswith("-row") else "bucket"
    return {
        "label": store if store == "memory" else f"{store}/{engine}",
        "store": store,
        "layout": layout,
        "family": store.split("-")[0],
        "engine": engine,
        "url": "" if store == "memory" else f"{engine}:///x",
        "cache": "none",
        "status": "ok",
        "version": f"{engine} 1.0",
        "raw_arm": "raw_pull_latest" in workloads,
        "workloads": workloads,
        "footprint": {
            "after_ingest": {
                "messages": 1000,
                "documents": 10 if layout == "bucket" else 1000,
                "data_bytes": 400_000,
                "index_bytes": int(index_per_msg * 1000),
                "data_bytes_per_message": 400.0,
                "index_bytes_per_message": index_per_msg,
                "messages_per_document": 100.0 if layout == "bucket" else 1.0,
            }
        },
        "duration_s": 1.0,
    }


# A backend whose server did not answer, as results.json records it.
SKIPPED: dict[str, Any] = {
    "label": "mongo-row/mongodb",
    "store": "mongo-row",
    "layout": "row",
    "family": "mongo",
    "engine": "mongodb",
    "url": "mongodb://db",
    "cache": "none",
    "status": "skipped",
    "version": "unknown (ServerSelectionTimeoutError)",
    "reason": "StoreUnavailable: no server",
}


def results(row_latest: float = 200.0, bucket_latest: float = 100.0) -> dict[str, Any]:
    """memory, sql-row and sql-bucket on sqlite, plus a skipped backend."""
    row = backend(
        "sql-row",
        "sqlite",
        {
            "pull_latest": run(row_latest),
            "raw_pull_latest": run(row_latest / 2, per_op=1, max_trips=1),
            "clear_small": run(50, writes=1),
            "clear_largest": run(52, writes=1),
        },
        index_per_msg=50.0,
    )
    bucket = backend(
        "sql-bucket",
        "sqlite",
        {
            "pull_latest": run(bucket_latest),
            "clear_small": run(50, writes=1),
            "clear_largest": run(51, writes=1),
        },
        index_per_msg=2.0,
    )
    memory = backend("memory", "memory", {"pull_latest": run(10)}, index_per_msg=0.3)
    return {
        "schema": "imbucket-bench/1",
        "created": "2026-01-01T00:00:00+00:00",
        "duration_s": 100.0,
        "parameters": {
            "scale": "small",
            "seed": 42,
            "scale_detail": {**to_json(SCALES["tiny"]), "ops": 10},
            "dataset": {
                "conversations": 3,
                "single_chats": 2,
                "groups": 1,
                "messages": 1000,
                "largest_conversation": 900,
                "median_conversation": 50,
                "group_messages": 900,
                "users": 10,
                "seed": 42,
            },
            "workloads": [
                {"name": name, "title": title, "about": f"about {name}", "ops": 10}
                for name, title in WORKLOADS
            ],
        },
        "machine": {"platform": "test", "python": "3.11", "cpu_count": 2, "cpu": "test cpu"},
        "git": {"commit": "0123456789abcdef", "branch": "bench", "dirty": False},
        "backends": [memory, row, bucket, dict(SKIPPED)],
    }
