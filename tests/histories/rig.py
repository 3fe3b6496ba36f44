"""What the histories tests share: configurations, services, the report and its assertion.

Each test runs a few clients (imbucket.testing.histories) on two conversations while one
fault is injected, then pulls everything once more from a fresh service, checks the whole
history (imbucket.testing.history_check) and prints its operation count, the fault and the
anomalies. The clients' pulls through a cache may lag by the cache's staleness bound.
"""

from __future__ import annotations

import copy
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from imbucket.app import MessageService, open_container, open_service
from imbucket.app.backends import read_marks_of, seqs_of, store_of, views_of
from imbucket.app.settings import load_settings
from imbucket.testing.histories import (
    READER_MIX,
    WRITER_MIX,
    ClientSpec,
    Operation,
    Recorder,
    Workload,
    final_pulls,
)
from imbucket.testing.history_check import check

Config = dict[str, Any]
SECONDS = 8.0  # each client's calls end by then
OPERATIONS = 400  # per client, at most


def workload(seed: int = 0, seconds: float = SECONDS, operations: int = OPERATIONS) -> Workload:
    """Two conversations of this test's own (a send one and an ingest one)."""
    name = uuid.uuid4().hex[:8]
    return Workload(f"si_h_{name}", f"si_i_{name}", operations, seconds, seed)


def staleness(config: Mapping[str, Any]) -> float:
    """How far behind a client on config may pull: its cache's staleness bound, 0 uncached."""
    cache = load_settings(config).cache
    if cache.backend == "none":
        return 0.0
    return cache.staleness_seconds


def config(store: Mapping[str, Any], cache: Mapping[str, Any] | None = None) -> Config:
    """A service configuration on store, with cache (None: uncached)."""
    return {"store": dict(store), "cache": dict(cache or {"backend": "none"})}


def with_cache_url(base: Config, url: str) -> Config:
    """base with its cache at url."""
    changed = copy.deepcopy(base)
    changed["cache"]["url"] = url
    return changed


def closed_port() -> int:
    """A loopback port nothing listens on (just freed)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


def store_only(settings: Config) -> MessageService:
    """A service on settings' store without its cache: what the store holds.

    Opened on the bare backend, so the store's cache binding is not checked.
    """
    backend = open_container(settings).backend()
    return MessageService(
        store_of(backend),
        seqs_of(backend),
        views=views_of(backend),
        read_marks=read_marks_of(backend),
    )


@dataclass
class Run:
    """The services a test opened (closed at the end) and the history they made."""

    recorder: Recorder = field(default_factory=Recorder)
    services: list[MessageService] = field(default_factory=list)
    stack: ExitStack = field(default_factory=ExitStack)

    def service(self, settings: Config) -> MessageService:
        """A new service on settings, like another process's."""
        service = open_service(settings)
        self.services.append(service)
        return service

    def client(self, name: str, settings: Config, writer: bool, pause: float = 0.0) -> ClientSpec:
        """A thread client with a service of its own on settings."""
        mix = WRITER_MIX if writer else READER_MIX
        return ClientSpec(name, self.service(settings), mix, staleness(settings), pause)


@contextmanager
def run() -> Iterator[Run]:
    """A Run whose services are closed at the end."""
    history = Run()
    try:
        with history.stack:
            yield history
    finally:
        for service in history.services:
            service.close()


def finish(
    history: Run,
    work: Workload,
    settings: Config,
    fault: str,
    extra: Sequence[Operation] = (),
    expect_anomalies: bool = False,
) -> list[str]:
    """Pull everything from the store, then through the cache; check, print the report, assert.

    Asserts no anomaly, or (expect_anomalies) at least one: the checker can fail.
    """
    truth = store_only(settings)
    history.services.append(truth)
    final_pulls(truth, history.recorder, work, "final")
    if staleness(settings):  # then through the cache, once it may lag no more
        time.sleep(staleness(settings))
        cached = history.service(settings)
        final_pulls(cached, history.recorder, work, "final-cached", staleness(settings))
    operations = [*history.recorder.operations, *extra]
    anomalies = check(operations)
    print(report(operations, fault, anomalies))
    if expect_anomalies:
        assert anomalies, "the checker found nothing wrong in a broken run"
    else:
        assert not anomalies, f"{len(anomalies)} anomalies, the first: {anomalies[0]}"
    return anomalies


def report(operations: Sequence[Operation], fault: str, anomalies: Sequence[str]) -> str:
    """The lines a histories test prints: operations by kind and outcome, fault, anomalies."""
    kinds = Counter(f"{op.call.kind} {op.outcome}" for op in operations)
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    lines = [
        f"fault: {fault}",
        f"operations: {len(operations)} ({counts})",
        f"anomalies: {len(anomalies)}",
        *anomalies[:20],
    ]
    if len(anomalies) > 20:
        lines.append(f"... and {len(anomalies) - 20} more")
    return "\n".join(lines)
