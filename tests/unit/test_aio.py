"""imbucket.aio runs the one implementation of the rules: no asyncio copy of any of them."""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from pathlib import Path

import pytest

from imbucket import ConfigError, Draft, open_service
from imbucket.aio import AsyncMessageService
from imbucket.aio import open_service as open_async
from imbucket.app.service import MessageService
from imbucket.domain.projection import Entry

SRC = Path(__file__).resolve().parents[2] / "src"
CONFIG = {"store": {"backend": "sql-bucket", "url": "sqlite://"}}


def test_the_async_service_runs_the_same_service_store_and_state_machines() -> None:
    async def opened() -> tuple[type, ...]:
        async with open_async(CONFIG) as service:
            inner = service.service
            repository = inner.store.repository  # type: ignore[attr-defined]
            return type(inner), type(inner.store), type(repository), type(inner.seqs)

    with open_service(CONFIG) as sync:
        expected = (
            type(sync),
            type(sync.store),
            type(sync.store.repository),  # type: ignore[attr-defined]
            type(sync.seqs),
        )
    assert asyncio.run(opened()) == expected
    assert expected[0] is MessageService


def test_only_the_async_service_opens_the_engines_asyncio_driver() -> None:
    """imbucket.aio passes the driver mode down to the engine it opens; a sync service opened
    beside it keeps the sync driver."""

    async def opened() -> tuple[tuple[bool, str], tuple[bool, str]]:
        async with open_async(CONFIG) as service:
            asynchronous = service.service.seqs.db  # type: ignore[attr-defined]
            with open_service(CONFIG) as sync:
                blocking = sync.seqs.db  # type: ignore[attr-defined]
                return (
                    (asynchronous.asynchronous, asynchronous.engine.dialect.driver),
                    (blocking.asynchronous, blocking.engine.dialect.driver),
                )

    assert asyncio.run(opened()) == ((True, "aiosqlite"), (False, "pysqlite"))


def test_no_rule_module_has_an_async_copy() -> None:
    """Only the asyncio facade, callers of it (the test kit, a benchmark) and a driver's
    connect hook define coroutines."""
    coroutines = {
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if re.search(r"^\s*async def ", path.read_text(), re.MULTILINE)
    }
    assert coroutines == {
        "app/aio.py",
        "testing/aio.py",
        "testing/concurrency.py",
        "bench/aio_bench.py",
        "bench/herd.py",
        "adapters/sql/dialects.py",  # an asyncio driver's connect hook
    }


def test_every_use_case_of_the_sync_service_is_a_coroutine_of_the_async_one() -> None:
    public = {
        name
        for name in vars(MessageService)
        if not name.startswith("_") and callable(getattr(MessageService, name))
    }
    missing = {
        name
        for name in public - {"close"}
        if not asyncio.iscoroutinefunction(getattr(AsyncMessageService, name, None))
    }
    assert missing == set()


# Every public use case of the sync service; close is aclose on the async one.
USE_CASES = [
    name
    for name in vars(MessageService)
    if not name.startswith("_") and inspect.isfunction(getattr(MessageService, name))
    if name != "close"
]


def differences(name: str) -> list[str]:
    """How the async use case name differs from the sync one, parameter by parameter: names,
    kinds, defaults and annotations (resolved to types), and the return type."""
    sync, asynchronous = getattr(MessageService, name), getattr(AsyncMessageService, name)
    found = [] if inspect.iscoroutinefunction(asynchronous) else ["not a coroutine function"]
    sync_types, async_types = typing.get_type_hints(sync), typing.get_type_hints(asynchronous)
    sync_parameters = list(inspect.signature(sync).parameters.values())
    async_parameters = list(inspect.signature(asynchronous).parameters.values())
    if len(sync_parameters) != len(async_parameters):
        found.append(f"{len(async_parameters)} parameters, not {len(sync_parameters)}")
    for mine, theirs in zip(async_parameters, sync_parameters, strict=False):
        for aspect in ("name", "kind", "default"):
            if getattr(mine, aspect) != getattr(theirs, aspect):
                found.append(f"{theirs.name}: {aspect} {getattr(mine, aspect)!r}")
        if async_types.get(mine.name) != sync_types.get(theirs.name):
            found.append(f"{theirs.name}: annotation {async_types.get(mine.name)!r}")
    if async_types.get("return") != sync_types.get("return"):
        found.append(f"returns {async_types.get('return')!r}, not {sync_types.get('return')!r}")
    return found


def test_each_coroutine_takes_the_use_cases_parameters_defaults_and_annotations() -> None:
    assert len(USE_CASES) == 16
    assert {name: found for name in USE_CASES if (found := differences(name))} == {}


def test_a_changed_default_is_a_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a coroutine whose default differs from the use case's."""

    async def pull_latest(
        self: AsyncMessageService, conversation_id: str, viewer_id: str, count: int = 50
    ) -> list[Entry]:
        raise NotImplementedError

    pull_latest.__annotations__ = dict(AsyncMessageService.pull_latest.__annotations__)
    monkeypatch.setattr(AsyncMessageService, "pull_latest", pull_latest)
    assert differences("pull_latest") == ["count: default 50"]


def test_a_backend_without_an_asyncio_driver_is_a_config_error() -> None:
    async def opened() -> None:
        await open_async({"store": {"backend": "openim-mongo", "url": "mongodb://x/db"}})

    with pytest.raises(ConfigError, match="no asyncio driver"):
        asyncio.run(opened())


def test_concurrent_sends_as_tasks_get_distinct_seqs() -> None:
    async def sends() -> list[int]:
        async with open_async(CONFIG) as service:
            batches = await asyncio.gather(
                *(
                    service.send("si_a_b", [Draft(send_id="a", content="x", client_msg_id=f"c{n}")])
                    for n in range(16)
                )
            )
            return sorted(message.seq for batch in batches for message in batch)

    assert asyncio.run(sends()) == list(range(1, 17))


def test_a_task_local_value_is_per_greenlet_as_concurrent_calls_need() -> None:
    from greenlet import getcurrent, greenlet

    from imbucket.adapters.asyncio_bridge import TaskLocal

    local, seen = TaskLocal(), []

    def call(value: str) -> None:
        local.set(value)
        getcurrent().parent.switch()  # another call runs and sets its own value meanwhile
        seen.append(local.get())

    first, second = greenlet(call), greenlet(call)
    first.switch("first")
    second.switch("second")
    first.switch()
    second.switch()
    assert seen == ["first", "second"]
    assert local.get() is None  # this thread's own greenlet set nothing


def test_the_async_bench_verdict_names_both_peaks() -> None:
    from imbucket.bench.aio_bench import Cell, verdict

    def cell(mode: str, callers: int, calls: int) -> Cell:
        return Cell("postgresql", "sql-bucket", "pull", mode, callers, calls, 1.0, 1.0)

    cells = [cell("threads", 4, 1237), cell("threads", 64, 1118)]
    cells += [cell("tasks", 4, 1324), cell("tasks", 64, 1041)]
    assert verdict(cells, "postgresql") == [
        "postgresql sql-bucket pull: tasks N=64 1041/s vs threads best N=4 1237/s: does not "
        "hold (tasks at their best, N=4: 1324/s)"
    ]


def test_without_greenlet_the_bridge_answers_plain_threads_and_never_imports_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import sys
    import threading
    from importlib.abc import MetaPathFinder

    from imbucket.adapters import asyncio_bridge

    attempts: list[str] = []

    class NoGreenlet(MetaPathFinder):
        def find_spec(self, name: str, path: object, target: object = None) -> None:
            if name == "greenlet":
                attempts.append(name)
                raise ModuleNotFoundError("No module named 'greenlet'", name="greenlet")

    monkeypatch.delitem(sys.modules, "greenlet", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NoGreenlet(), *sys.meta_path])
    try:
        bridge = importlib.reload(asyncio_bridge)
        attempts.clear()
        local = bridge.TaskLocal()
        for value in range(50):
            local.set(value)
            assert local.get() == value
            assert bridge.in_greenlet() is False
        assert attempts == []
        assert bridge._caller() is threading.current_thread()
    finally:
        monkeypatch.undo()
        importlib.reload(asyncio_bridge)
