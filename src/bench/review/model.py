"""What a review measured: every regime's results and how each regime kept its time share."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from imbucket.bench.memory_budget import MemoryResults
from imbucket.bench.results import ContentionRun, MachineLoad, RunResults, to_json
from imbucket.bench.scale import ScaleResults

SCHEMA = "imbucket-review/1"


@dataclass
class RegimeRun:
    """One regime: its share of the budget, what it spent, and what it left out."""

    regime: str
    share_s: float
    spent_s: float = 0.0
    scale: str = ""  # what it ran at, in words
    cut_short: list[str] = field(default_factory=list)  # stopped by its share: what was cut
    not_run: list[str] = field(default_factory=list)  # left out for another reason, with why

    @property
    def was_cut(self) -> bool:
        """Whether the regime's share ran out before it finished."""
        return bool(self.cut_short)


@dataclass
class LayoutContention:
    """Contention runs of one layout on one engine (an empty store of its own)."""

    engine: str
    store: str
    runs: list[ContentionRun] = field(default_factory=list)


@dataclass
class Review:
    """The whole review: the memo's source, and the content of review.json."""

    engines: list[str]
    budget_s: float
    target_messages: int
    pulls_per_s: float
    profile: str | None = None  # the traffic file, None: the default mix
    created: str = ""
    duration_s: float = 0.0
    regimes: dict[str, RegimeRun] = field(default_factory=dict)
    in_memory: RunResults | None = None
    out_of_memory: MemoryResults | None = None
    growth: ScaleResults | None = None
    contention: list[LayoutContention] = field(default_factory=list)
    load: MachineLoad | None = None  # other processes' share of the CPU over the review
    private: dict[str, str] = field(default_factory=dict)  # engine -> server as run

    def regime(self, name: str) -> RegimeRun:
        """The regime's record (an empty one when it did not run)."""
        return self.regimes.get(name) or RegimeRun(name, 0.0, not_run=["not run"])

    def to_json(self) -> dict[str, Any]:
        """review.json's content."""
        data: dict[str, Any] = {
            "schema": SCHEMA,
            "created": self.created,
            "duration_s": round(self.duration_s, 1),
            "engines": self.engines,
            "budget_s": self.budget_s,
            "target": {"messages": self.target_messages, "pulls_per_s": self.pulls_per_s},
            "profile": self.profile,
            "private": self.private,
            "regimes": {k: asdict(v) for k, v in self.regimes.items()},
            "load": None if self.load is None else asdict(self.load),
        }
        data["in_memory"] = None if self.in_memory is None else to_json(self.in_memory)
        data["out_of_memory"] = None if self.out_of_memory is None else asdict(self.out_of_memory)
        data["growth"] = None if self.growth is None else asdict(self.growth)
        data["contention"] = [asdict(c) for c in self.contention]
        return data
