"""Each backend of a run set up and opened, and where the run happened.

A backend's URL (its own, or an SQLite file in the run's folder), server version and unique
label; opening it in a scratch namespace; its result before anything ran, and its storage
footprint; the machine and the commit the run's results name.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from imbucket.app.service import MessageService
from imbucket.bench.instrument.pages import PageCount
from imbucket.bench.instrument.probe import Probe
from imbucket.bench.instrument.scratch import (
    is_emulated,
    scratch_redis,
    scratch_store,
    server_version,
)
from imbucket.bench.results import BackendResult, Footprint, GitInfo, Machine, Pages, Unsized
from imbucket.bench.spec import BackendSpec, redact
from imbucket.bench.workloads import RawArm, Subject
from imbucket.domain.model import StoreStats


@dataclass(frozen=True, slots=True)
class Setup:
    """One backend of a run, resolved: where it runs and what it is called."""

    spec: BackendSpec
    label: str
    url: str
    version: str
    namespace: str  # scratch schema, database or key prefix of this backend


def resolve(spec: BackendSpec, workdir: Path, namespace: str, labels: set[str]) -> Setup:
    """Spec resolved: its URL, server version, flavour and a label not yet in labels (added)."""
    url = store_url(spec, workdir)
    version = _version(spec, url)
    spec = replace(spec, flavour="mariadb" if "mariadb" in version.lower() else "")
    return Setup(spec, _unique(spec.label, labels), url, version, namespace)


def backend_result(setup: Setup) -> BackendResult:
    """The result of setup's backend before anything ran: what it is, status ``skipped``."""
    spec = setup.spec
    return BackendResult(
        label=setup.label,
        store=spec.store,
        layout=spec.layout,
        family=spec.family,
        engine=spec.engine,
        url=redact(setup.url),
        cache=spec.cache,
        status="skipped",
        version=setup.version,
        bucket_size=spec.bucket_size,
        encoding=spec.encoding,
        emulated=is_emulated(setup.version),
    )


def open_subject(setup: Setup, stack: ExitStack, probe: Probe) -> tuple[Subject, dict[str, Any]]:
    """Open the backend in a scratch namespace released by stack; raises if it cannot.

    Returns the subject and the config it was opened with.
    """
    spec = setup.spec
    config = spec.config()
    config["store"]["url"] = stack.enter_context(scratch_store(setup.url, setup.namespace))
    if spec.cache != "none":
        config["cache"]["key_prefix"] = stack.enter_context(
            scratch_redis(spec.cache_url, setup.namespace)
        )
    service = probe.open_service(config)
    stack.callback(service.close)
    service.max_seq("imbucket-bench-probe")  # connects now, so failures skip cleanly
    return Subject(service, _raw_arm(spec, service)), config


def _unique(label: str, taken: set[str]) -> str:
    candidate, n = label, 1
    while candidate in taken:
        n += 1
        candidate = f"{label}#{n}"
    taken.add(candidate)
    return candidate


def store_url(spec: BackendSpec, workdir: Path) -> str:
    """The URL a backend runs on: its own, or an SQLite file in workdir for SQL stores."""
    if spec.url or spec.family != "sql":
        return spec.url
    size = "" if spec.bucket_size is None else f"-{spec.bucket_size}"
    encoding = "" if spec.encoding is None else f"-{spec.encoding}"
    return f"sqlite:///{workdir / (spec.store + size + encoding + '.sqlite')}"


def _version(spec: BackendSpec, url: str) -> str:
    version = (
        server_version(url)
        if url
        else f"Python {platform.python_implementation()} {platform.python_version()}"
    )
    if spec.cache != "none":
        version += f" + {server_version(spec.cache_url)}"
    return version


def per_op_pages(count: PageCount, ops: int) -> Pages:
    """Pages counted over ops operations, per operation."""
    per = max(ops, 1)
    kinds = {k: round(v / per, 2) for k, v in count.by_kind.items()}
    return Pages(round(count.touched / per, 2), round(count.read / per, 2), kinds)


def _raw_arm(spec: BackendSpec, service: MessageService) -> RawArm | None:
    """The hand-written driver arm of an uncached store, where its engine has one."""
    if spec.cache != "none":
        return None
    from imbucket.bench.instrument.raw import raw_arm

    return raw_arm(service.store)


def footprint(service: MessageService) -> Footprint | Unsized:
    """Storage footprint from stats(), with bytes per stored message."""
    try:
        stats: StoreStats = service.stats()
    except Exception as error:  # reported, not fatal: some engines cannot size themselves
        return Unsized(f"{type(error).__name__}: {error}")
    per = max(stats.messages, 1)
    return Footprint(
        messages=stats.messages,
        documents=stats.documents,
        data_bytes=stats.data_bytes,
        index_bytes=stats.index_bytes,
        data_bytes_per_message=round(stats.data_bytes / per, 1),
        index_bytes_per_message=round(stats.index_bytes / per, 2),
        messages_per_document=round(stats.messages / max(stats.documents, 1), 2),
    )


def machine() -> Machine:
    """Where the run happened."""
    cpu = platform.processor() or platform.machine()
    memory_gb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gb = round(int(line.split()[1]) / 1024**2, 1)
                break
    except OSError:
        pass
    return Machine(platform.platform(), sys.version.split()[0], os.cpu_count(), cpu, memory_gb)


def git_info() -> GitInfo:
    """Commit of the code that ran (empty when not in a git checkout, e.g. a wheel install)."""
    here = Path(__file__).resolve().parent  # git finds the checkout from any folder inside it

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        return GitInfo(
            commit=git("rev-parse", "HEAD"),
            branch=git("rev-parse", "--abbrev-ref", "HEAD"),
            dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
        )
    except (OSError, subprocess.SubprocessError):
        return GitInfo()
