"""How busy the machine was while the benchmark ran, read from /proc (Linux).

Latencies measured on a loaded machine are inflated and noisier: the report flags a busy
machine at its top, so a reader can tell noise from a finding.
"""

from __future__ import annotations

import os
from pathlib import Path

from imbucket.bench.results import MachineLoad

# Other processes used at least this share of all CPU time during the run: busy.
BUSY_SHARE = 0.25


def _cpu_ticks() -> tuple[int, int] | None:
    """All CPUs' busy and total ticks since boot, from /proc/stat; None where unreadable."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def _load() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def _own_seconds() -> float:
    """CPU seconds of this process and of its children that were waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class LoadWatch:
    """Started with the run; ``finish`` says how busy the machine was in between."""

    def __init__(self) -> None:
        self._ticks = _cpu_ticks()
        self._own = _own_seconds()
        self._load = _load()

    def finish(self) -> MachineLoad:
        """The machine's load over the watched time."""
        own = _own_seconds() - self._own
        ticks, share = _cpu_ticks(), None
        if ticks is not None and self._ticks is not None:
            busy, total = (now - then for now, then in zip(ticks, self._ticks, strict=True))
            per_second = os.sysconf("SC_CLK_TCK")
            if total > 0:
                share = max(0.0, min(1.0, (busy - own * per_second) / total))
        return others_load(os.cpu_count(), self._load, _load(), share, own)


def others_load(
    cpus: int | None, start: list[float], end: list[float], share: float | None, own: float
) -> MachineLoad:
    """A MachineLoad, flagged busy when others took BUSY_SHARE of the CPU.

    Where that share cannot be read, when the load average at the start exceeded the cores.
    The share wins where it exists: the load average lags by a minute, so a run started right
    after another one (the benchmark run twice in a row) would count its predecessor.
    """
    early = bool(start and cpus and start[0] > cpus)
    busy = share >= BUSY_SHARE if share is not None else early
    rounded = None if share is None else round(share, 3)
    return MachineLoad(cpus, start, end, rounded, round(own, 1), busy)


def warning(load: MachineLoad | None) -> str:
    """A sentence for the top of the report when the machine was busy, else ""."""
    if load is None or not load.busy:
        return ""
    share = "" if load.others_cpu_share is None else f"{load.others_cpu_share:.0%} "
    average = "/".join(f"{v:g}" for v in load.load_start) or "?"
    return (
        f"Busy machine: other processes used {share}of the CPU time during this run (load "
        f"average {average} at the start, {load.cpu_count} cores). Latencies are inflated and "
        "noisier; read the intervals, and rerun on an idle machine before trusting a close "
        "verdict."
    )
