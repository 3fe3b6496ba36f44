"""Runs every workload on every chosen backend, in one process, one operation at a time.

All backends are opened first; then each workload runs on every backend in turn before the
next workload starts. Backends never run at the same time, and a burst of load on a shared
machine hits the same workload of every backend alike instead of whichever backend was
running then.
"""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from imbucket.adapters.extras import needs_extra
from imbucket.app.service import MessageService
from imbucket.bench import bulk, contention, offered_load, send_section
from imbucket.bench.dataset import SCALES, Batch, Dataset
from imbucket.bench.instrument import received, roundtrips
from imbucket.bench.instrument.maintenance import routine_maintenance
from imbucket.bench.instrument.pages import PageCount, PageMeter, Uncounted, page_meter
from imbucket.bench.instrument.probe import Probe, probing
from imbucket.bench.instrument.wal import LogMeter, Unmetered, log_meter
from imbucket.bench.machine import LoadWatch
from imbucket.bench.metrics import Recorder
from imbucket.bench.results import (
    SCHEMA,
    BackendResult,
    ContentionRun,
    DatasetSummary,
    LogWrites,
    Parameters,
    Plan,
    Received,
    RunResults,
    SendPlan,
    WorkloadInfo,
)
from imbucket.bench.setups import (
    Setup,
    backend_result,
    footprint,
    git_info,
    machine,
    open_subject,
    per_op_pages,
    resolve,
)
from imbucket.bench.spec import BackendSpec
from imbucket.bench.traffic import Traffic
from imbucket.bench.workloads import WORKLOADS, Op, Subject, Workload

DEFAULT_TRIALS = 5  # fits `make bench`: the operations are split, not multiplied
WARMUP_MAX = 10  # untimed operations before the trials: at most this, a tenth of the plan
SLICES_PER_TRIAL = 8  # the turns backends take inside one trial


@dataclass(frozen=True, slots=True)
class Options:
    """How big the run is and which workloads it includes."""

    scale: str = "small"
    seed: int = 42
    workloads: tuple[str, ...] = ()  # empty: all
    traffic: Traffic | None = None  # None: the built-in shape of the scale
    bucket_sizes: tuple[int, ...] = ()  # the sweep's sizes (the specs are already expanded)
    contention: bool = True  # run the contention workloads after the others
    sends: bool = True  # sends against the raw driver, after everything else
    trials: int = DEFAULT_TRIALS  # each workload's timed operations split into this many
    # The offered-load section's rates (empty: no such section).
    rates: tuple[offered_load.Rate, ...] = offered_load.parse_rates(offered_load.DEFAULT_RATES)
    # A time.perf_counter() value: past it, a workload ends after its current trial (the
    # first always runs) and the offered load is left out. None: every trial runs.
    deadline: float | None = None


class Observer:
    """Progress callbacks of a run; the CLI draws Rich progress bars from them."""

    def backend(self, label: str, ops: int) -> None:
        """A backend is open; ops is the number of operations it will run."""

    def workload(self, label: str, title: str, ops: int) -> None:
        """A workload starts on a backend."""

    def advance(self, label: str) -> None:
        """One operation of the backend is done."""

    def done(self, label: str, status: str, note: str) -> None:
        """A backend finished (status ``ok``) or was skipped (with the reason in note)."""


@dataclass
class _Open:
    """A backend being benchmarked: its subject and its results so far."""

    setup: Setup
    subject: Subject
    result: BackendResult
    seconds: float = 0.0
    config: dict[str, Any] | None = None  # what another process opens the store with
    meter: LogMeter | None = None  # bytes the engine writes to its log; None: not measured
    maintain: Callable[[], None] | None = None  # the engine's routine between workloads
    pages: PageMeter | None = None  # pages the engine touches and reads; None: not counted


def run(
    specs: Sequence[BackendSpec], options: Options, observer: Observer | None = None
) -> RunResults:
    """Run the benchmark and return its results (the content of results.json)."""
    observer = observer or Observer()
    if options.scale not in SCALES:
        raise ValueError(f"unknown scale {options.scale!r}; known: {', '.join(SCALES)}")
    started = time.perf_counter()
    watch = LoadWatch()
    dataset = Dataset(SCALES[options.scale], options.seed, options.traffic)
    # ingest always runs: it loads the data every other workload reads or tags
    wanted = {"ingest", *options.workloads} if options.workloads else {w.name for w in WORKLOADS}
    plans = {w.name: w.plan(dataset) for w in WORKLOADS if w.name in wanted}
    # A workload with nothing to do at this scale (hot_delete_spilled at tiny) does not run.
    chosen = [w for w in WORKLOADS if plans.get(w.name) or w.name == "ingest"]
    run_id = uuid.uuid4().hex[:8]
    results: list[BackendResult] = []
    plan = contention.PLANS.get(options.scale) if options.contention else None
    with tempfile.TemporaryDirectory(prefix="imbucket-bench-") as workdir, ExitStack() as stack:
        received.prepare()  # before any MongoDB client exists, like the round-trip probe
        probe = stack.enter_context(probing())
        labels: set[str] = set()
        backends: list[_Open] = []
        for n, spec in enumerate(specs):
            setup = resolve(spec, Path(workdir), f"imbucket_bench_{run_id}_{n}", labels)
            result = backend_result(setup)
            results.append(result)
            ops = {w.name: len(plans[w.name]) for w in chosen}
            if spec.encoding is not None:
                ops.pop("ingest", None)  # bulk-loaded, untimed (_run_workloads)
            opened = _open_backend(setup, result, stack, probe, observer, ops)
            backends += [] if opened is None else [opened]
        _run_workloads(chosen, plans, backends, dataset, probe, observer, options)
        for backend in backends:
            backend.result.footprint.end = footprint(backend.subject.service)
        if options.rates and not _past(options.deadline):
            _offered_load(backends, plans, options, observer)
        _concurrent_sections(backends, plan, options, run_id, observer)
        for backend in backends:
            backend.result.status = "ok"
            backend.result.duration_s = round(backend.seconds, 2)
            observer.done(backend.setup.label, "ok", "")
    return RunResults(
        schema=SCHEMA,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - started, 2),
        parameters=_parameters(options, dataset, chosen, plans, plan),
        machine=machine(),
        git=git_info(),
        backends=results,
        load=watch.finish(),
    )


def _run_workloads(
    chosen: list[Workload],
    plans: dict[str, list[Op]],
    backends: list[_Open],
    dataset: Dataset,
    probe: Probe,
    observer: Observer,
    options: Options,
) -> None:
    """Every chosen workload on every backend, side by side in trials.

    An encoding variant (a bucket store in an encoding asked for next to its default) is
    loaded by the bulk loader instead of the timed ingest: what it is there to show is its
    bytes and its reads and tag writes, and its ingest would add the longest workload again.
    """
    loaded = "redeliver" if "redeliver" in plans else "ingest"
    for workload in chosen:
        if workload.raw:
            continue  # measured interleaved with the service workload it mirrors
        timed = backends
        if workload.name == "ingest":
            timed = [b for b in backends if b.setup.spec.encoding is None]
            for variant in (b for b in backends if b not in timed):
                _bulk_load(variant, dataset, observer, loaded)
            preloaded = dataset.preloaded_batches()
            for backend in timed:
                _preload(backend, dataset, preloaded, observer)
        sides = [_side(workload, chosen, plans, b, probe, observer) for b in timed]
        _in_trials(sides, options.trials, options.deadline)
        for side in sides:
            side.finish(loaded)


def _bulk_load(backend: _Open, dataset: Dataset, observer: Observer, loaded: str) -> None:
    """The dataset into backend's store by the bulk loader (untimed), sized if nothing follows."""
    clock = time.perf_counter()
    observer.workload(backend.setup.label, "ingest (bulk loader, untimed)", 0)
    bulk.load(backend.subject.service, dataset)
    if backend.maintain is not None:
        backend.maintain()
    if loaded == "ingest":
        backend.result.footprint.after_ingest = footprint(backend.subject.service)
    backend.seconds += time.perf_counter() - clock


def _preload(backend: _Open, dataset: Dataset, batches: list[Batch], observer: Observer) -> None:
    """The batches before the ones ``ingest`` times, by the bulk loader (untimed)."""
    clock = time.perf_counter()
    observer.workload(backend.setup.label, "ingest: first batches (bulk loader, untimed)", 0)
    bulk.load(backend.subject.service, dataset, batches=batches)
    backend.seconds += time.perf_counter() - clock


def _open_backend(
    setup: Setup,
    result: BackendResult,
    stack: ExitStack,
    probe: Probe,
    observer: Observer,
    ops: dict[str, int],
    cache_kib: int | None = None,
) -> _Open | None:
    """Open one backend, or record in result why it was skipped (None)."""
    try:
        with needs_extra(f"backend {setup.label!r}"):
            subject, config = open_subject(setup, stack, probe)
    except Exception as error:  # any failure to open means: skip this backend, say why
        result.reason = f"{type(error).__name__}: {error}"
        observer.done(setup.label, "skipped", result.reason)
        return None
    result.raw_arm = subject.raw is not None
    meter = _meter(config["store"]["url"], result, stack)
    runs = {w.name for w in WORKLOADS if not w.raw or subject.raw is not None}
    observer.backend(setup.label, sum(n for name, n in ops.items() if name in runs))
    shareable = setup.spec.store != "memory"  # another process sees the same data
    opened = _Open(setup, subject, result, config=config if shareable else None, meter=meter)
    routine = routine_maintenance(subject.service.store)
    if routine is not None:
        opened.maintain, result.maintenance = routine
    opened.pages = _page_meter(subject.service, result, stack, cache_kib)
    return opened


def _page_meter(
    service: MessageService, result: BackendResult, stack: ExitStack, cache_kib: int | None
) -> PageMeter | None:
    """The meter of the store's pages, or None with the reason in result."""
    try:
        meter = page_meter(service.store, cache_kib)
    except Uncounted as error:
        result.pages_missing = str(error)
        return None
    stack.callback(meter.close)
    result.pages_source = meter.source
    return meter


def _meter(url: str, result: BackendResult, stack: ExitStack) -> LogMeter | None:
    """The meter of the store's log, or None with the reason in result."""
    if result.emulated:
        result.log_missing = "not measured on the emulator: mongoeco keeps no journal"
        return None
    try:
        meter = log_meter(url)
    except Unmetered as error:
        result.log_missing = str(error)
        return None
    stack.callback(meter.close)
    result.log_source = meter.source
    return meter


def _raw_twin(workload: Workload, chosen: list[Workload]) -> Workload | None:
    """The raw-driver workload mirroring workload (``raw_<name>``), if one was chosen."""
    return next((w for w in chosen if w.raw and w.name == f"raw_{workload.name}"), None)


_Runs = tuple[Workload, list[Op], Workload | None, list[Op] | None]


def _side(
    workload: Workload,
    chosen: list[Workload],
    plans: dict[str, list[Op]],
    backend: _Open,
    probe: Probe,
    observer: Observer,
) -> _Side:
    """One backend's share of a workload: its plan, and its raw twin's where it has an arm."""
    twin = _raw_twin(workload, chosen) if backend.subject.raw is not None else None
    twin_plan = plans[twin.name] if twin is not None else None
    runs = (workload, plans[workload.name], twin, twin_plan)
    side = _Side(runs, backend, Recorder(probe.round_trips), Recorder(probe.round_trips))
    observer.workload(backend.setup.label, workload.title, len(runs[1]) + len(twin_plan or ()))
    side.observer = observer
    return side


def trial_bounds(ops: int, trials: int) -> list[tuple[int, int]]:
    """The warm-up's bounds, then each trial's: [start, stop) indexes into a plan of ops.

    The warm-up is the plan's first operations (a tenth, at most WARMUP_MAX); the rest splits
    into at most trials non-empty chunks of sizes differing by at most one.
    """
    warm = min(WARMUP_MAX, ops // 10)
    left = ops - warm
    count = max(1, min(trials, left))
    cuts = [warm + left * k // count for k in range(count + 1)]
    return [(0, warm), *itertools.pairwise(cuts)]


def slices(start: int, stop: int, count: int = SLICES_PER_TRIAL) -> list[tuple[int, int]]:
    """[start, stop) cut into at most count non-empty slices of sizes differing by at most one."""
    ops = stop - start
    count = max(1, min(count, ops))
    return list(itertools.pairwise(start + ops * k // count for k in range(count + 1)))


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _in_trials(sides: list[_Side], trials: int, deadline: float | None = None) -> None:
    """The warm-up on every backend, then each trial, its slices alternating between backends.

    Inside a trial every backend runs a slice of its operations in turn, the first taking
    turns from slice to slice: a burst of machine load then falls on every layout's share
    of the same trial, so their ratio in that trial keeps what the layouts do, not when the
    burst came.
    """
    if not sides:
        return
    bounds = trial_bounds(len(sides[0].runs[1]), trials)
    for side in sides:
        side.run(*bounds[0], timed=False)
    turn = 0
    for n, (start, stop) in enumerate(bounds[1:]):
        if n and _past(deadline):
            break  # the run's time is spent: this workload keeps the trials it finished
        for side in sides:
            side.next_trial()
        for first, last in slices(start, stop):
            for side in sides[turn:] + sides[:turn]:
                side.run(first, last, timed=True)
            turn = (turn + 1) % len(sides)


@dataclass
class _Side:
    """A workload (and its raw twin, interleaved) on one backend, run chunk by chunk."""

    runs: _Runs
    backend: _Open
    recorder: Recorder
    twin_recorder: Recorder
    observer: Observer = field(default_factory=Observer)
    replies: Counter[str] = field(default_factory=Counter)
    written: int = 0
    # Pages the engine touched during the timed chunks, and the operations they served (a
    # raw twin reads the same pages as its pulls, so its operations count too).
    paged: PageCount = field(default_factory=lambda: PageCount(0, 0))
    paged_ops: int = 0

    def run(self, start: int, stop: int, timed: bool) -> None:
        """Operations [start, stop) of the plan: a trial when timed, else the warm-up.

        A twin's operations alternate with the workload's, the first of each pair taking
        turns, so both arms meet the same machine noise and warm the same caches: their
        ratio (goal 2) compares two halves of one loop. Log bytes and received bytes are
        counted around the timed chunks only, so a server-wide counter never sees another
        backend's chunk.
        """
        workload, plan, _, twin_plan = self.runs
        clock, label, meter = time.perf_counter(), self.backend.setup.label, self.backend.meter
        if timed:
            if meter is not None:
                meter.begin()
            if self.backend.pages is not None:
                self.backend.pages.begin()
        counting: AbstractContextManager[Counter[str]] = (
            received.counting() if workload.received and timed else nullcontext(Counter())
        )
        with counting as replies:
            for n in range(start, stop):
                each = [(self.recorder, plan[n])]
                if twin_plan is not None:
                    each.insert(n % 2, (self.twin_recorder, twin_plan[n]))
                for recorder, op in each:
                    recorder.time(op.prepare(self.backend.subject), op.items, timed)
                    self.observer.advance(label)
                if meter is not None and timed:
                    meter.after_op()  # untimed: the clock stopped inside recorder.time
        self.replies.update(replies)
        if meter is not None and timed:
            self.written += meter.written()
        if self.backend.pages is not None and timed:
            self.paged = self.paged + self.backend.pages.pages()
            self.paged_ops += (stop - start) * (1 if twin_plan is None else 2)
        self.backend.seconds += time.perf_counter() - clock

    def next_trial(self) -> None:
        """Start a trial: the timed operations from now on also go into its own histograms."""
        self.recorder.next_trial()
        self.twin_recorder.next_trial()

    def finish(self, loaded: str) -> None:
        """Store the results; run the engine's routine; after the loading workload, size it."""
        clock = time.perf_counter()
        workload, _, twin, _ = self.runs
        result = self.recorder.result()
        if workload.received:
            ops = max(result.ops, 1)
            by_driver = {k: round(v / ops, 1) for k, v in sorted(self.replies.items())}
            result = replace(
                result, received=Received(round(sum(self.replies.values()) / ops, 1), by_driver)
            )
        if self.backend.pages is not None:
            result = replace(result, pages=per_op_pages(self.paged, self.paged_ops))
        if self.backend.meter is not None:  # the service workload's: a raw twin only reads
            per_op = self.written / max(result.ops, 1)
            per_item = self.written / max(result.items, 1)
            result = replace(
                result, log=LogWrites(self.written, round(per_op, 1), round(per_item, 1))
            )
        found = self.backend.result.workloads
        found[workload.name] = result
        if twin is not None:
            found[twin.name] = self.twin_recorder.result()
        if self.backend.maintain is not None:
            self.backend.maintain()
        if workload.name == loaded:
            self.backend.result.footprint.after_ingest = footprint(self.backend.subject.service)
        self.backend.seconds += time.perf_counter() - clock


def _offered_load(
    backends: list[_Open], plans: dict[str, list[Op]], options: Options, observer: Observer
) -> None:
    """Latency at fixed offered rates of the traffic's repeatable operations (offered_load)."""
    budget = offered_load.BUDGETS.get(options.scale, offered_load.BUDGETS["small"])
    # an encoding variant is left out, as from the contention runs: its layout is the default's
    entries = [(b.result, b.subject) for b in backends if b.setup.spec.encoding is None]
    mixed = {n: plans[n] for n in offered_load.WORKLOADS if plans.get(n)}
    started = time.perf_counter()
    offered_load.measure(
        entries,
        mixed,
        options.traffic,
        options.rates,
        budget,
        options.seed,
        lambda label, title: observer.workload(label, title, 0),
    )
    share = (time.perf_counter() - started) / max(1, len(backends))
    for backend in backends:
        backend.seconds += share


def _concurrent_sections(
    backends: list[_Open], plan: Plan | None, options: Options, run_id: str, observer: Observer
) -> None:
    """The contention runs, then the sends against the raw driver: after every workload.

    Both run many threads at once; they come last so their writes (to conversations of
    their own) never meet a single-threaded workload's timing or a footprint.
    """
    # an encoding variant: its layout's contention is the default's
    contended = [b for b in backends if b.setup.spec.encoding is None] if plan else []
    for backend in contended:
        assert plan is not None
        clock = time.perf_counter()
        backend.result.contention = _contend(backend, plan, run_id, observer)
        backend.result.contention_s = round(time.perf_counter() - clock, 2)
        backend.seconds += time.perf_counter() - clock
    for backend in backends if options.sends else ():
        _sends(backend, send_section.plan(options.scale), observer)


def _parameters(
    options: Options,
    dataset: Dataset,
    chosen: list[Workload],
    plans: dict[str, list[Op]],
    plan: Plan | None,
) -> Parameters:
    traffic = dataset.reported_traffic()
    return Parameters(
        scale=options.scale,
        seed=options.seed,
        scale_detail=dataset.scale,
        dataset=DatasetSummary(**dataset.summary(), traffic=traffic),
        workloads=[WorkloadInfo(w.name, w.title, w.about, len(plans[w.name])) for w in chosen],
        bucket_sizes=list(options.bucket_sizes) or None,
        traffic=None if options.traffic is None else traffic,
        contention=plan,
        trials=options.trials,
        offered_load=[_rate_text(r) for r in options.rates] or None,
        sends=send_section.plan(options.scale) if options.sends else None,
    )


def _rate_text(rate: offered_load.Rate) -> str:
    return f"{rate.fraction:.0%}" if rate.fraction else f"{rate.ops_per_s:g} ops/s"


def _contend(backend: _Open, plan: Plan, run_id: str, observer: Observer) -> list[ContentionRun]:
    label = backend.setup.label
    return contention.measure(
        backend.subject.service,
        backend.config,
        plan,
        f"c{run_id}{_digits(label)}",
        lambda title: observer.workload(label, f"contention: {title}", 0),
    )


def _sends(backend: _Open, plan: SendPlan, observer: Observer) -> None:
    """Backend's sends against the raw driver, or why they were not measured.

    A measurement that fails is recorded as the reason, so the rest of the report stands.
    """
    result, label = backend.result, backend.setup.label
    result.sends_missing = send_section.unmeasured(result)
    if result.sends_missing is not None:
        return
    clock = time.perf_counter()
    try:
        with roundtrips.unwatched():  # the raw arm's DBAPI cursor is never counted
            result.sends = send_section.measure(
                backend.subject.service, plan, lambda title: observer.workload(label, title, 0)
            )
    except Exception as error:  # the section's failure is reported, never the run's
        result.sends_missing = f"failed: {type(error).__name__}: {error}"
    result.sends_s = round(time.perf_counter() - clock, 2)
    backend.seconds += time.perf_counter() - clock


def _digits(label: str) -> str:
    """A short tag of a label, so that two backends on one server never share a group."""
    return f"{zlib.crc32(label.encode()) % 10_000:04d}"
