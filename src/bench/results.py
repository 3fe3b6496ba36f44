"""The benchmark's results, typed: what the runner builds and every later stage reads.

report, charts, console, compare, sweep, concurrency and analysis read these dataclasses,
never string keys. results.json is ``to_json(RunResults)`` and reads back with
``RunResults.from_json``; the JSON keeps the field names, and a field holding None is left
out (unless its metadata says ``keep``, for values where null means "not measured"), and so
is an empty field marked ``omit_empty``.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from imbucket.bench.dataset import Scale
from imbucket.bench.traffic import Traffic

SCHEMA = "imbucket-bench/1"
_KEEP = {"keep": True}  # a None that is written as null: "not measured"
_OMIT_EMPTY = {"omit_empty": True}  # absent from the JSON while empty (a backend that never ran)

T = TypeVar("T")


WORKERS = (1, 4, 16)  # contention runs at each of these numbers of workers


@dataclass(frozen=True, slots=True)
class Plan:
    """How big each run is: operations in all (split over the workers) and a deadline."""

    ops: int
    seconds: float
    workers: tuple[int, ...] = WORKERS
    # Scenarios also run as worker processes (N > 1; each process opens its own store).
    processes: tuple[str, ...] = ("hot_group",)


@dataclass(frozen=True, slots=True)
class Latency:
    """Latency percentiles in µs (p95 and mean: single-threaded workloads only)."""

    p50: int
    p99: int
    max: int
    p95: int | None = None
    mean: float | None = None


@dataclass(frozen=True, slots=True)
class RoundTripStats:
    """Round trips per operation of one workload, counted at the drivers."""

    per_op: float
    reads_per_op: float
    writes_per_op: float
    max: int
    typical: int
    distribution: dict[str, int] = field(default_factory=dict)
    by_driver: dict[str, float] = field(default_factory=dict)
    writes_by_driver: dict[str, float] = field(default_factory=dict)

    @property
    def fewest(self) -> int:
        """The cheapest operation's round trips (behind a cache: a fully cached one)."""
        return min((int(k) for k in self.distribution), default=self.typical)


@dataclass(frozen=True, slots=True)
class LogWrites:
    """Bytes the engine wrote to its log (WAL, redo log) during one workload's loop."""

    bytes: int
    per_op: float
    per_item: float


@dataclass(frozen=True, slots=True)
class Received:
    """Bytes of the replies the drivers received, per operation of one workload."""

    per_op: float
    by_driver: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pages:
    """Pages the engine touched (hit or read) and read (buffer misses) per operation."""

    touched_per_op: float
    read_per_op: float
    by_kind: dict[str, float] = field(default_factory=dict)  # touched per op (PostgreSQL)


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """One workload on one backend."""

    ops: int
    items: int
    seconds: float
    ops_per_s: float
    items_per_s: float
    latency_us: Latency
    round_trips: RoundTripStats
    errors: int
    error_samples: dict[str, int] = field(default_factory=dict)
    histogram: str = ""
    log: LogWrites | None = None  # None: the backend's log is not measured
    received: Received | None = None  # measured on the workloads that ask for it only
    pages: Pages | None = None  # None: the engine's pages are not counted
    # Operations run before the trials, untimed: their round trips and errors count.
    warmup: int = field(default=0, metadata=_OMIT_EMPTY)
    # One encoded latency histogram per trial (the confidence intervals resample them).
    trials: list[str] = field(default_factory=list, metadata=_OMIT_EMPTY)


@dataclass(frozen=True, slots=True)
class Footprint:
    """Storage footprint from a store's stats(), with bytes per stored message."""

    messages: int
    documents: int
    data_bytes: int
    index_bytes: int
    data_bytes_per_message: float
    index_bytes_per_message: float
    messages_per_document: float


@dataclass(frozen=True, slots=True)
class Unsized:
    """Why a store could not be sized (its stats() failed)."""

    error: str


@dataclass(slots=True)
class Footprints:
    """Footprint after the data was loaded, and at the end of the run."""

    after_ingest: Footprint | Unsized | None = None
    end: Footprint | Unsized | None = None

    def measured(self) -> Footprint | None:
        """The footprint after ingest when it was sized, else None."""
        found = self.after_ingest
        return found if isinstance(found, Footprint) else None


@dataclass(frozen=True, slots=True)
class ContentionRun:
    """One contention run: a scenario at N workers, as threads or processes."""

    scenario: str
    mode: str
    workers: int
    ops: int
    planned: int
    writes: int
    seconds: float
    ops_per_s: float
    latency_us: Latency
    conflicts: dict[str, int]
    conflicts_per_write: float
    errors: int
    error_samples: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SendRun:
    """Sends through the service against the raw driver at one scenario and caller count.

    Both arms ran ``rounds`` alternating rounds of ``calls`` fresh drafts each; calls per
    second are over all of an arm's rounds, p99 over all of its calls.
    """

    scenario: str  # many: each call its own conversation; hot: one group takes every call
    callers: int
    calls: int  # per arm and round
    rounds: int
    service_calls_per_s: float
    service_p99_ms: float
    raw_calls_per_s: float
    raw_p99_ms: float

    @property
    def cost_ratio(self) -> float | None:
        """What a send through the service costs against the raw driver's (raw ÷ service)."""
        if self.service_calls_per_s <= 0:
            return None
        return self.raw_calls_per_s / self.service_calls_per_s


@dataclass(frozen=True, slots=True)
class SendPlan:
    """The send section's size: caller counts, calls per arm and round, and rounds."""

    callers: tuple[int, ...]
    calls: int  # per arm and round; at least one per caller
    rounds: int


@dataclass(slots=True)
class BackendResult:
    """One backend of a run: what it is and, when it ran, what it measured."""

    label: str
    store: str
    layout: str
    family: str
    engine: str
    url: str
    cache: str
    status: str  # "ok", or "skipped" with the reason
    version: str
    bucket_size: int | None = None  # set in a sweep only
    # The bucket encoding asked for (None: the backend's default); absent from the JSON otherwise.
    encoding: str | None = field(default=None, metadata=_OMIT_EMPTY)
    # An emulator of the engine's protocol ran it (mongoeco); absent from the JSON otherwise.
    emulated: bool = field(default=False, metadata=_OMIT_EMPTY)
    reason: str | None = None
    raw_arm: bool | None = None
    # What the log bytes of its workloads count (log_source), or why they are not measured.
    log_source: str | None = None
    log_missing: str | None = None
    # What the page counts of its workloads count (pages_source), or why they are not counted.
    pages_source: str | None = None
    pages_missing: str | None = None
    # The engine's routine run after each workload, untimed (PostgreSQL: VACUUM), if any.
    maintenance: str | None = None
    workloads: dict[str, WorkloadResult] = field(default_factory=dict, metadata=_OMIT_EMPTY)
    footprint: Footprints = field(default_factory=Footprints, metadata=_OMIT_EMPTY)
    contention: list[ContentionRun] = field(default_factory=list, metadata=_OMIT_EMPTY)
    contention_s: float | None = None
    duration_s: float | None = None
    # Latency at fixed offered rates (imbucket.bench.offered_load), when the run had a load section.
    offered: list[OfferedRun] = field(default_factory=list, metadata=_OMIT_EMPTY)
    # Sends through the service against the raw driver (imbucket.bench.send_section), or why
    # this backend's were not measured.
    sends: list[SendRun] = field(default_factory=list, metadata=_OMIT_EMPTY)
    sends_missing: str | None = None
    sends_s: float | None = None

    @property
    def ok(self) -> bool:
        """Whether the backend ran."""
        return self.status == "ok"

    @property
    def engine_key(self) -> tuple[str, str, str]:
        """Family, engine and cache: backends with the same key differ in layout or size."""
        return self.family, self.engine, self.cache

    def p50(self, workload: str) -> float | None:
        """Median latency in µs, None when the workload did not run."""
        run = self.workloads.get(workload)
        return None if run is None or not run.ops else float(run.latency_us.p50)

    def trips(self, workload: str) -> float | None:
        """Mean round trips per operation, None when the workload did not run."""
        run = self.workloads.get(workload)
        return None if run is None else float(run.round_trips.per_op)


@dataclass(frozen=True, slots=True)
class OfferedRun:
    """A workload mix driven at a fixed offered rate on one backend.

    Each operation is timed from its intended start, so a late start counts as latency (no
    coordinated omission).
    """

    fraction: float  # of the closed-loop throughput the rate was derived from (0: absolute)
    offered_ops_per_s: float
    achieved_ops_per_s: float
    ops: int
    planned: int  # operations scheduled; fewer ran when the deadline stopped the run
    latency_us: Latency
    p999_us: int
    late: int  # operations that started after their intended start
    errors: int = 0
    histogram: str = ""


@dataclass(frozen=True, slots=True)
class MachineLoad:
    """How busy the machine was while the benchmark ran (from /proc)."""

    cpu_count: int | None
    load_start: list[float]  # 1, 5 and 15 min load average at the start
    load_end: list[float]
    others_cpu_share: float | None  # other processes' share of all CPU time during the run
    own_cpu_s: float | None  # CPU seconds of the benchmark (and its finished children)
    busy: bool


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """A workload of the run, and how many operations each backend ran."""

    name: str
    title: str
    about: str
    ops: int


@dataclass(frozen=True, slots=True)
class DatasetSummary:
    """Shape of the generated dataset."""

    conversations: int
    single_chats: int
    groups: int
    messages: int
    largest_conversation: int
    median_conversation: int
    group_messages: int
    users: int
    seed: int
    traffic: Traffic | None = None


@dataclass(frozen=True, slots=True)
class Parameters:
    """What was run: scale, seed, dataset, workloads, sweep sizes, traffic, contention plan."""

    scale: str
    seed: int
    scale_detail: Scale
    dataset: DatasetSummary
    workloads: list[WorkloadInfo]
    bucket_sizes: list[int] | None = None
    traffic: Traffic | None = None  # None: the built-in traffic
    contention: Plan | None = None  # None: no contention runs
    trials: int | None = None  # each workload's timed operations split into this many trials
    offered_load: list[str] | None = None  # the offered-load section's rates
    sends: SendPlan | None = None  # None: no section of sends against the raw driver

    def titles(self, layouts_only: bool = False) -> dict[str, str]:
        """Workload name -> title, in run order; layouts_only leaves out the raw-driver arm."""
        return {
            w.name: w.title
            for w in self.workloads
            if not (layouts_only and w.name.startswith("raw_"))
        }


@dataclass(frozen=True, slots=True)
class Machine:
    """Where the run happened."""

    platform: str
    python: str
    cpu_count: int | None
    cpu: str
    memory_gb: float | None = None


@dataclass(frozen=True, slots=True)
class GitInfo:
    """The commit of the code that ran (all None outside a git checkout)."""

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


@dataclass(frozen=True, slots=True)
class RatioReading:
    """bucket/row p50 of one workload on one engine, and what it means."""

    engine: str
    workload: str
    p50_ratio: float
    round_trips: list[float | None]  # row, bucket
    reading: list[str]
    ci: list[float] | None = None  # the ratio's 95 % interval [low, high] (imbucket.bench.stats)
    verdict: str | None = None  # faster, slower, on par or inconclusive


@dataclass(frozen=True, slots=True)
class TargetLine:
    """One measured line of the project's targets."""

    target: str
    scope: str
    measured: str
    passed: bool | None = field(default=None, metadata=_KEEP)  # None: not measured
    note: str | None = None
    # A time target whose interval straddles its limit: neither pass nor FAIL.
    inconclusive: bool = field(default=False, metadata=_OMIT_EMPTY)

    @property
    def verdict(self) -> str:
        """pass, FAIL, inconclusive or n/a."""
        if self.inconclusive:
            return "inconclusive"
        return {True: "pass", False: "FAIL", None: "n/a"}[self.passed]


@dataclass(frozen=True, slots=True)
class SweepReading:
    """One engine of a bucket-size sweep: the weighted cost at each size, and a reading."""

    engine: str
    sizes: list[int]
    weighted_p50_us: list[float | None]
    row_weighted_p50_us: float | None = field(metadata=_KEEP)
    reading: str


@dataclass(frozen=True, slots=True)
class Analysis:
    """Ratios, readings and targets (stored in results.json; the report recomputes them)."""

    ratios: list[RatioReading]
    targets: list[TargetLine]
    sweep: list[SweepReading] | None = None
    contention: dict[str, str] | None = None  # scenario -> reading
    answers: list[str] | None = None  # one paragraph per engine: which layout, and why


@dataclass(frozen=True, slots=True)
class CompareSummary:
    """Counts of notable changes since an earlier run."""

    compared: int
    slower: int
    faster: int
    round_trips_changed: int


@dataclass(frozen=True, slots=True)
class Comparison:
    """The change since an earlier run, as written into results.json."""

    against: str
    summary: CompareSummary
    changes: list[dict[str, str]]  # one table row: header -> cell


@dataclass(slots=True)
class RunResults:
    """A whole run: the content of results.json."""

    schema: str
    created: str
    duration_s: float
    parameters: Parameters
    machine: Machine
    git: GitInfo
    backends: list[BackendResult]
    analysis: Analysis | None = None
    compare: Comparison | None = None
    load: MachineLoad | None = None  # how busy the machine was during the run

    def ok_backends(self) -> list[BackendResult]:
        """Backends that ran."""
        return [b for b in self.backends if b.ok]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResults:
        """Read back what ``to_json`` wrote (results.json)."""
        return from_json(cls, data)


def to_json(value: Any) -> Any:
    """The JSON form of a results dataclass (or of any value inside one)."""
    if is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in fields(value):
            item = getattr(value, f.name)
            if item is None and not f.metadata.get("keep"):
                continue
            converted = to_json(item)
            if f.metadata.get("omit_empty") and not converted:
                continue
            out[f.name] = converted
        return out
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


def from_json(kind: type[T], data: Any) -> T:
    """A kind (a dataclass above) from its JSON form; unknown keys are ignored."""
    hints = get_type_hints(kind)
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    values = {k: _convert(hints[k], v) for k, v in data.items() if k in names}
    return kind(**values)


def _member(members: tuple[Any, ...], value: Any) -> Any:
    """The member of a union a JSON value stands for: the dataclass having all its keys."""
    kinds = [m for m in members if m is not type(None)]
    for kind in kinds:
        keyed = is_dataclass(kind) and isinstance(value, Mapping)
        if keyed and set(value) <= {f.name for f in fields(kind)}:
            return kind
    return kinds[0]


def _convert(hint: Any, value: Any) -> Any:
    """Value (parsed JSON) as the type hint says."""
    if value is None:
        return None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return _convert(_member(args, value), value)
    if isinstance(hint, type) and is_dataclass(hint):
        return from_json(hint, value)
    if origin in (list, tuple):
        items = [_convert(args[0], v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        return {k: _convert(args[1], v) for k, v in value.items()}
    if hint is float and isinstance(value, int):
        return float(value)
    return value
