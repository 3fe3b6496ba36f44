"""Runs a review: every regime in turn, each within its share of the budget.

Engines named (``postgresql``, ``mariadb``) run on private instances the review starts and
stops, as the memory-budget run does; ``sqlite`` on files in a temporary folder; a URL on
that server (its out-of-memory regime on a private instance of the same engine, since only a
private server's buffer can be bounded).
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from imbucket.bench import contention, instances, memory_budget, runner, scale
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.bench.instrument.probe import probing
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.bench.machine import LoadWatch
from imbucket.bench.results import ContentionRun
from imbucket.bench.results import Plan as ContentionPlan
from imbucket.bench.review import budget as budgeting
from imbucket.bench.review.budget import Clock, Spent
from imbucket.bench.review.model import LayoutContention, RegimeRun, Review
from imbucket.bench.spec import BackendSpec
from imbucket.bench.traffic import Traffic
from imbucket.domain.errors import ConfigError

SERVER_BUFFER = 128 * 1024 * 1024  # private instances outside the memory budget: roomy
OUT_OF_MEMORY_BUDGET = "10%"
CONTENTION_OPS = 160
# The next size of a ladder runs if the last size's time, scaled by the ratio of their
# messages and this margin, is left (loading and sizing are linear in messages).
MARGIN = 1.2
# The out-of-memory run's scales: it starts at the plan's and goes on while its share holds.
OUT_OF_MEMORY_SCALES = ("tiny", "small", "medium")


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine of the review: its name and where it runs ("" until started, for sqlite)."""

    name: str
    url: str = ""


def parse_engines(text: str) -> list[Engine]:
    """``sqlite,postgresql,mysql+pymysql://u@h/db``: names or SQLAlchemy URLs; ConfigError."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "://" in part:
            found.append(Engine(BackendSpec("sql-row", part).engine, part))
        elif part in memory_budget.ENGINES:
            found.append(Engine(part))
        else:
            raise ConfigError(f"engine {part!r}: a name among {memory_budget.ENGINES} or a URL")
    if not found:
        raise ConfigError("--engines names no engine")
    return found


class Timed(runner.Observer):
    """An observer passing progress on, raising Spent once the regime's share is spent."""

    def __init__(self, inner: runner.Observer, clock: Clock) -> None:
        self.inner, self.clock = inner, clock

    def backend(self, label: str, ops: int) -> None:  # noqa: D102 (the Observer's)
        self.inner.backend(label, ops)

    def workload(self, label: str, title: str, ops: int) -> None:  # noqa: D102
        self.clock.check()
        self.inner.workload(label, title, ops)

    def advance(self, label: str) -> None:  # noqa: D102
        self.inner.advance(label)
        self.clock.check()

    def done(self, label: str, status: str, note: str) -> None:  # noqa: D102
        self.inner.done(label, status, note)


@dataclass(frozen=True, slots=True)
class Request:
    """What the review is asked: engines, traffic, budget, target, seed."""

    engines: list[Engine]
    budget_s: float
    traffic: Traffic | None = None
    profile: str | None = None
    target_messages: int = 1_000_000_000
    pulls_per_s: float = 10_000.0
    seed: int = 42


Observers = Callable[[], runner.Observer]  # a fresh observer (progress bars) per regime
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class _Context:
    """What every regime reads: the engines as started, the request, the plan, the sinks."""

    engines: list[Engine]
    request: Request
    plan: budgeting.Plan
    found: Review
    observers: Observers
    say: Say


def review(request: Request, observers: Observers, say: Say, folder: Path) -> Review:
    """Run every regime, returning what they measured; in-memory/ gets the bench report."""
    from imbucket.bench import report

    plan = budgeting.plan(request.budget_s, len(request.engines))
    for row in plan.rows():
        say("plan: " + " · ".join(row))
    started, watch = time.perf_counter(), LoadWatch()
    found = Review(
        [e.name for e in request.engines],
        request.budget_s,
        request.target_messages,
        request.pulls_per_s,
        request.profile,
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    steps = (
        ("in_memory", _in_memory),
        ("out_of_memory", _out_of_memory),
        ("contention", _contention),
        ("growth", _growth),
    )
    with _servers(request.engines, found) as engines:
        context = _Context(engines, request, plan, found, observers, say)
        for n, (name, step) in enumerate(steps, 1):
            elapsed = time.perf_counter() - started
            clock = Clock(plan.share(name, elapsed))
            run = found.regimes[name] = RegimeRun(name, round(clock.share_s, 1))
            say(
                f"[{n}/{len(steps)}] {budgeting.TITLES[name]} · share {clock.share_s:,.0f} s · "
                f"{elapsed:,.0f}/{request.budget_s:,.0f} s of the budget used"
            )
            step(context, clock, run)
            run.spent_s = round(clock.spent(), 1)
            if run.was_cut:
                say(f"    cut short: {'; '.join(run.cut_short)}")
    if found.in_memory is not None:
        report.write(found.in_memory, folder / "in-memory")
    found.load = watch.finish()
    found.duration_s = time.perf_counter() - started
    return found


@contextmanager
def _servers(engines: list[Engine], found: Review) -> Iterator[list[Engine]]:
    """The engines with a URL each: private instances started for the named servers."""
    with tempfile.TemporaryDirectory(prefix="imbucket-review-") as folder, ExitStack() as stack:
        ready = []
        for engine in engines:
            if engine.url:
                ready.append(engine)
                found.private[engine.name] = "the server at the URL given"
            elif engine.name == "sqlite":
                ready.append(Engine("sqlite", f"sqlite:///{Path(folder) / 'review'}"))
            else:
                instance = instances.start(engine.name, SERVER_BUFFER)
                stack.callback(instance.close)
                ready.append(Engine(engine.name, instance.url))
                found.private[engine.name] = (
                    f"a private instance, buffer {SERVER_BUFFER // 2**20} MiB outside the "
                    "memory budget"
                )
        yield ready


def layouts(engine: Engine) -> tuple[str, str]:
    """The row and bucket stores of the engine's family."""
    return ("mongo-row", "mongo-bucket") if engine.name == "mongodb" else memory_budget.LAYOUTS


def _store_config(engine: Engine, store: str, url: str) -> dict[str, Any]:
    extra = {} if engine.name == "mongodb" else memory_budget.STORE
    return {"store": {"backend": store, "url": url, **extra}}


def _sqlite_file(engine: Engine, store: str, tag: str) -> str:
    return f"{engine.url}-{tag}-{store}.sqlite" if engine.name == "sqlite" else engine.url


def _in_memory(context: _Context, clock: Clock, run: RegimeRun) -> None:
    engines, request, plan, found = context.engines, context.request, context.plan, context.found
    observers = context.observers
    specs = [
        BackendSpec(store, _sqlite_file(e, store, "memory"))
        for e in engines
        for store in layouts(e)
    ]
    options = runner.Options(
        scale=plan.in_memory_scale,
        seed=request.seed,
        traffic=request.traffic,
        contention=False,
        deadline=clock.deadline,
    )
    run.scale = f"scale {plan.in_memory_scale}"
    with _entered(observers()) as observer:
        results = runner.run(specs, options, observer)
    found.in_memory = results
    for backend in results.ok_backends():
        short = [
            f"{name} {len(w.trials)}/{options.trials} trials"
            for name, w in backend.workloads.items()
            if w.trials and len(w.trials) < options.trials
        ]
        if short:
            run.cut_short.append(f"{backend.label}: " + ", ".join(short))
        if options.rates and not backend.offered:
            run.cut_short.append(f"{backend.label}: offered load left out")
    run.not_run += [f"{b.label}: {b.reason}" for b in results.backends if not b.ok]


@contextmanager
def _entered(observer: runner.Observer) -> Iterator[runner.Observer]:
    """The observer, entered when it is a context manager (Rich progress bars)."""
    enter = getattr(observer, "__enter__", None)
    if enter is None:
        yield observer
        return
    with observer:  # type: ignore[attr-defined]
        yield observer


def _out_of_memory(context: _Context, clock: Clock, run: RegimeRun) -> None:
    """The memory-budget run, at the plan's scale and then larger while the share holds."""
    engines, request, plan = context.engines, context.request, context.plan
    names = tuple(e.name for e in engines if e.name in memory_budget.ENGINES)
    run.not_run += [
        f"{e.name}: the memory budget bounds SQL engines only"
        for e in engines
        if e.name not in memory_budget.ENGINES
    ]
    budget = memory_budget.parse_budget(OUT_OF_MEMORY_BUDGET)
    ladder = OUT_OF_MEMORY_SCALES[OUT_OF_MEMORY_SCALES.index(plan.out_of_memory_scale) :]
    kept: memory_budget.MemoryResults | None = None
    last_s = 0.0
    for scale_name in ladder if names else ():
        if kept is not None and not _fits(last_s, kept.messages, scale_name, clock):
            break
        begun = time.perf_counter()
        with _entered(Timed(context.observers(), clock)) as observer:
            part = memory_budget.run(names, budget, scale_name, request.seed, observer)
        spent = [e for e in part.engines if e.reason and e.reason.startswith(Spent.__name__)]
        for engine_run in spent:
            engine_run.reason = "cut short: the regime's share was spent"
        if spent and kept is not None:
            run.cut_short.append(f"scale {scale_name}: stopped part-way; scale {kept.scale} kept")
            break
        kept, last_s = part, time.perf_counter() - begun
        if spent:
            run.cut_short += [f"{e.engine}: stopped part-way, nothing kept" for e in spent]
            break
    context.found.out_of_memory = kept
    if kept is not None:
        run.scale = f"scale {kept.scale}, buffer {budget} of the data"


def _fits(last_s: float, last_messages: int, scale_name: str, clock: Clock) -> bool:
    """Whether scale_name should finish in the time left, judged from the last run's time."""
    messages = Dataset(SCALES[scale_name]).messages
    return last_s * MARGIN * messages / max(last_messages, 1) <= clock.left()


def _growth(context: _Context, clock: Clock, run: RegimeRun) -> None:
    engines, request, plan, found = context.engines, context.request, context.plan, context.found
    observers = context.observers
    urls = {e.name: ("" if e.name == "sqlite" else e.url) for e in engines}
    urls = {k: v for k, v in urls.items() if k in memory_budget.ENGINES}
    results = scale.ScaleResults(request.seed, SERVER_BUFFER)
    found.growth = results
    ran: list[int] = []
    last_s = 0.0
    for n, size in enumerate(plan.growth_sizes):
        # Past the first two sizes, the next one (ten times larger) runs if it should fit.
        if n >= 2 and last_s * MARGIN * size / ran[-1] > clock.left():
            break
        if clock.left() <= 0:
            run.cut_short.append(f"{size:,} messages: not started")
            break
        begun = time.perf_counter()
        try:
            with _entered(Timed(observers(), clock)) as observer:
                part = scale.run(urls, (size,), request.seed, SERVER_BUFFER, observer)
        except Spent:
            run.cut_short.append(f"{size:,} messages: stopped part-way, not kept")
            break
        results.points += part.points
        ran.append(size)
        last_s = time.perf_counter() - begun
    run.scale = ", ".join(f"{s:,}" for s in ran) + " messages"


def _contention(context: _Context, clock: Clock, run: RegimeRun) -> None:
    engines, found, say = context.engines, context.found, context.say
    stores = [(e, store) for e in engines for store in layouts(e)]
    per_layout = 3 * len(ContentionPlan(0, 0).workers) + 2  # scenarios × N, processes for N > 1
    run.scale = f"{CONTENTION_OPS} operations per run"
    for k, (engine, store) in enumerate(stores):
        left = clock.left()
        if left <= 0:
            run.cut_short.append(f"{store}/{engine.name}: not started")
            continue
        seconds = max(1.0, left / ((len(stores) - k) * per_layout))
        plan = replace(ContentionPlan(CONTENTION_OPS, seconds))
        say(f"    contention {store}/{engine.name}: each run up to {seconds:,.1f} s")
        runs = _contend(engine, store, plan, k)
        found.contention.append(LayoutContention(engine.name, store, runs))
        unfinished = [f"{r.scenario} {r.workers} {r.mode}" for r in runs if r.ops < r.planned]
        if unfinished:
            run.cut_short.append(f"{store}/{engine.name}: {', '.join(unfinished)}")


def _contend(engine: Engine, store: str, plan: ContentionPlan, k: int) -> list[ContentionRun]:
    where = _sqlite_file(engine, store, "contention")
    tag = f"rv{k}{int(time.time()) % 100_000}"
    with probing() as probe, scratch_store(where, f"imbucket_review_c{k}") as url:
        config = _store_config(engine, store, url)
        service = probe.open_service(config)
        try:
            return contention.measure(service, config, plan, tag)
        finally:
            service.close()
