"""How fast ``imbucket migrate`` writes into PostgreSQL, beside PostgreSQL's own ``COPY``.

``python -m imbucket.bench.migrate_rate --url postgresql+psycopg://…`` builds, in one run, a
sql-row store on an SQLite file holding N messages (default 50,000: the bench dataset's mix
of many short 1:1 chats, Pareto-sized groups and one giant group, scaled to N), then runs
interleaved trials of three arms, each into a fresh PostgreSQL schema:

- ``migrate → sql-row`` and ``migrate → sql-bucket``: ``imbucket.app.migrate.migrate`` from
  the SQLite store (opened once, shared by the trials) into a target service opened (and
  its tables created) before the clock starts; the clock covers the whole run — slots,
  counters, watermarks and claims;
- ``COPY``: the same messages, one row each with sql-row's message columns, sent by
  psycopg's ``cursor.copy`` into a plain table of those columns (no key, no index) and
  committed; the rows are built before the clock starts, so the arm is the engine's bulk
  rate.

The arms' order rotates from trial to trial. It prints each trial's messages per second,
each arm's median, and each migrate arm's rate over COPY's: the geometric mean of the
per-trial ratios (each migrate trial against the COPY trial beside it) with its 95 %
interval (Student's t on the log ratios). Each migrate arm's first target is verified
(``imbucket.app.migrate.verify``, outside the clock) and the differences are printed.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imbucket.adapters.sql.bulk_load import MESSAGE_ROW, message_row
from imbucket.adapters.sql.schema import row_schema
from imbucket.app import open_service
from imbucket.app.migrate import migrate, verify
from imbucket.app.service import MessageService
from imbucket.bench import bulk
from imbucket.bench.dataset import Dataset, Scale
from imbucket.bench.instrument.scratch import scratch_store
from imbucket.domain.model import Slot

ARMS = ("migrate → sql-row", "migrate → sql-bucket", "COPY")
# Two-sided 95 % quantiles of Student's t by degrees of freedom (1.96 beyond the table).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}
_T95 |= {9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def scale_for(messages: int) -> Scale:
    """The bench dataset's shape scaled to about ``messages`` messages.

    A fifth in 1:1 chats of eight messages on average, a tenth in one giant group, the rest
    shared by sixteen groups of Pareto sizes; users enough for the chats.
    """
    chats = max(1, messages // 40)
    return Scale(
        name=f"migrate-{messages}",
        single_chats=chats,
        single_mean=8,
        groups=16,
        group_messages=int(messages * 0.7),
        giants=(max(50, messages // 10),),
        users=max(200, 2 * math.isqrt(chats) + 100),
        ops=1,
        redeliveries=0,
        hot_deleters=0,
    )


@dataclass(slots=True)
class Arm:
    """One arm's trials: messages per second, in trial order."""

    name: str
    rates: list[float] = field(default_factory=list)


def ratio_interval(tops: Sequence[float], bottoms: Sequence[float]) -> tuple[float, float, float]:
    """Geometric mean of the paired ratios top/bottom and its 95 % interval (t on the logs)."""
    logs = [math.log(t / b) for t, b in zip(tops, bottoms, strict=True)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    df = len(logs) - 1
    t = next((_T95[d] for d in sorted(_T95) if d >= df), 1.96)
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def build_source(path: Path, dataset: Dataset) -> MessageService:
    """A sql-row store on an SQLite file holding the dataset (bulk-loaded), opened."""
    service = open_service({"store": {"backend": "sql-row", "url": f"sqlite:///{path}"}})
    bulk.load(service, dataset)
    return service


def copy_rows(dataset: Dataset) -> list[tuple[Any, ...]]:
    """The dataset's messages as sql-row message rows (MESSAGE_ROW order)."""
    rows = []
    for message in dataset.iter_messages():
        row = message_row(message.conversation_id, message.seq, Slot(message=message))
        assert row is not None
        rows.append(row)
    return rows


def copy_arm(url: str, rows: Sequence[tuple[Any, ...]]) -> float:
    """Seconds to COPY rows into a new plain table of sql-row's message columns, committed."""
    import psycopg
    from sqlalchemy import make_url
    from sqlalchemy.dialects import postgresql

    table = row_schema().messages
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    columns = ", ".join(f'"{c.name}" {c.type.compile(dialect=dialect)}' for c in table.c)
    names = ", ".join(f'"{name}"' for name in MESSAGE_ROW)
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as connection:
        connection.execute(f"CREATE TABLE copy_arm ({columns})")
        connection.commit()
        started = time.perf_counter()
        statement = f"COPY copy_arm ({names}) FROM STDIN"
        with connection.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        connection.commit()
        return time.perf_counter() - started


def migrate_arm(source: MessageService, url: str, backend: str, check: bool) -> tuple[float, int]:
    """Seconds of one migration into a new store at url, and the differences verify found.

    The target is opened (tables created) before the clock starts; verify runs after it
    stops, only when check (-1 differences otherwise).
    """
    target = open_service({"store": {"backend": backend, "url": url}})
    try:
        started = time.perf_counter()
        migrate(source, target)
        seconds = time.perf_counter() - started
        differences = verify(source, target).differences if check else -1
    finally:
        target.close()
    return seconds, differences


def run(url: str, messages: int, trials: int, seed: int, say: Callable[[str], None]) -> None:
    """Build the source, run the interleaved trials and print what they measured."""
    dataset = Dataset(scale_for(messages), seed)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="migrate-rate-")))
        say(
            f"source: sql-row on SQLite, {dataset.messages:,} messages in "
            f"{len(dataset.conversations):,} conversations (seed {seed})"
        )
        source = build_source(folder / "source.sqlite", dataset)
        stack.callback(source.close)
        rows = copy_rows(dataset)
        arms = {name: Arm(name) for name in ARMS}
        for trial in range(trials):
            order = ARMS[trial % 3 :] + ARMS[: trial % 3]
            for name in order:
                scratch = f"imb_rate_{uuid.uuid4().hex[:12]}"
                with scratch_store(url, scratch) as scratch_url:
                    if name == "COPY":
                        seconds = copy_arm(scratch_url, rows)
                        note = ""
                    else:
                        backend = name.split("→ ")[1]
                        seconds, differences = migrate_arm(source, scratch_url, backend, trial == 0)
                        note = f", verify: {differences} differences" if differences >= 0 else ""
                rate = dataset.messages / seconds
                arms[name].rates.append(rate)
                say(f"trial {trial + 1} {name:<22} {seconds:7.3f} s  {rate:>10,.0f} msg/s{note}")
        _summary(arms, say)


def _summary(arms: dict[str, Arm], say: Callable[[str], None]) -> None:
    """Each arm's median rate, and each migrate arm over COPY with its interval."""
    say("")
    for arm in arms.values():
        say(
            f"{arm.name:<22} median {statistics.median(arm.rates):>10,.0f} msg/s "
            f"over {len(arm.rates)} trials"
        )
    copy = arms["COPY"].rates
    for name in ARMS[:2]:
        point, low, high = ratio_interval(arms[name].rates, copy)
        say(f"{name} / COPY: {point:.3f} (95 % interval {low:.3f}–{high:.3f})")


def main(argv: Sequence[str] | None = None) -> None:
    """The command line (see the module doc)."""
    parser = argparse.ArgumentParser(prog="python -m imbucket.bench.migrate_rate")
    parser.add_argument(
        "--url",
        default=os.environ.get("IMBUCKET_TEST_POSTGRES_URL"),
        help="PostgreSQL URL (postgresql+psycopg://…); default $IMBUCKET_TEST_POSTGRES_URL",
    )
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if not args.url or not args.url.startswith("postgresql"):
        parser.error("--url must name a PostgreSQL server (postgresql+psycopg://…)")
    if args.trials < 1 or args.messages < 1:
        parser.error("--trials and --messages must be at least 1")
    run(args.url, args.messages, args.trials, args.seed, lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
