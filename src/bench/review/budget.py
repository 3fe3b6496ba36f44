"""The review's time budget: parsed, split across the regimes up front, and kept.

Each regime gets a share of the budget before anything runs; a regime picks the largest size
its share can hold and stops cleanly once the share is spent (it is then marked cut short).
A regime that finishes early leaves its time to the ones after it, in proportion to their
shares: the growth run goes last, since a larger size is what extra time buys most.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from imbucket.domain.errors import ConfigError

REGIMES = ("in_memory", "out_of_memory", "contention", "growth")
TITLES = {
    "in_memory": "in memory",
    "out_of_memory": "out of memory",
    "growth": "at scale",
    "contention": "contention",
    "capacity": "capacity plan",
}
# Shares of the budget; what is left over covers starting instances and writing the memo.
SHARES = {"in_memory": 0.32, "out_of_memory": 0.22, "growth": 0.26, "contention": 0.12}
MIN_BUDGET_S = 30.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {"": 60.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}

# Rough seconds per engine (both layouts) of the in-memory run at each scale, offered load
# included; the largest scale whose guess fits the share runs, and the deadline holds it.
IN_MEMORY_GUESS_S = (("medium", 900.0), ("small", 60.0), ("tiny", 8.0))
# The out-of-memory run at each scale: bulk load of both layouts, then cold and warm passes.
OUT_OF_MEMORY_GUESS_S = (("medium", 300.0), ("small", 30.0), ("tiny", 4.0))
GROWTH_SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
# Below this share per engine, the growth run starts ten times smaller.
GROWTH_SMALL_SHARE_S = 45.0


def parse_duration(text: str) -> float:
    """``10m``, ``90s``, ``1.5h`` or a bare number of minutes, in seconds; ConfigError."""
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(f"budget {text!r} is not a duration like 10m, 90s or 1h")
    seconds = float(match[1]) * _UNIT_S[(match[2] or "").lower()]
    if seconds < MIN_BUDGET_S:
        raise ConfigError(f"budget {text!r}: a review needs at least {MIN_BUDGET_S:.0f} s")
    return seconds


@dataclass(frozen=True, slots=True)
class Plan:
    """What each regime may spend and the sizes chosen for it, decided before the run."""

    budget_s: float
    shares_s: dict[str, float]
    in_memory_scale: str
    out_of_memory_scale: str
    growth_sizes: tuple[int, ...]  # the first two always run; the rest while the share lasts

    def share(self, regime: str, used_s: float) -> float:
        """Regime's share once used_s of the budget is gone: the rest, split by the shares."""
        later = REGIMES[REGIMES.index(regime) :]
        left = self.budget_s * sum(SHARES.values()) - used_s
        return max(0.0, left * SHARES[regime] / sum(SHARES[r] for r in later))

    def rows(self) -> list[tuple[str, str, str]]:
        """regime, seconds, what it runs: the plan as printed at the start."""
        what = {
            "in_memory": f"scale {self.in_memory_scale}, offered load included",
            "out_of_memory": f"scale {self.out_of_memory_scale} and up under a memory budget",
            "growth": ", ".join(f"{n:,}" for n in self.growth_sizes) + " messages",
            "contention": "hot group, many groups, readers; to completion",
        }
        return [(TITLES[r], f"{self.shares_s[r]:,.0f} s", what[r]) for r in REGIMES]


def _pick(guesses: tuple[tuple[str, float], ...], share_s: float, engines: int) -> str:
    for scale, seconds in guesses:
        if seconds * engines <= share_s:
            return scale
    return guesses[-1][0]


def plan(budget_s: float, engines: int) -> Plan:
    """Split budget_s across the regimes for this many engines and pick each one's sizes."""
    shares = {r: budget_s * SHARES[r] for r in REGIMES}
    engines = max(1, engines)
    return Plan(
        budget_s,
        shares,
        _pick(IN_MEMORY_GUESS_S, shares["in_memory"], engines),
        _pick(OUT_OF_MEMORY_GUESS_S, shares["out_of_memory"], engines),
        GROWTH_SIZES
        if shares["growth"] >= GROWTH_SMALL_SHARE_S * engines
        else (1_000, *GROWTH_SIZES),
    )


class Spent(Exception):
    """A regime's share of the budget is spent: it stops where it is."""


@dataclass
class Clock:
    """A regime's deadline on the monotonic clock."""

    share_s: float
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = time.perf_counter()

    @property
    def deadline(self) -> float:
        """The time.perf_counter() value at which the share is spent."""
        return self.started + self.share_s

    def left(self) -> float:
        """Seconds of the share left (negative once spent)."""
        return self.deadline - time.perf_counter()

    def spent(self) -> float:
        """Seconds used so far."""
        return time.perf_counter() - self.started

    def check(self) -> None:
        """Raise Spent once the share is spent."""
        if self.left() < 0:
            raise Spent(f"its share of {self.share_s:,.0f} s was spent")
