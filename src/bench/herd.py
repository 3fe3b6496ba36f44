"""The herd workload: N members of one group pull its newest message at once.

A message lands in a big group and every online member pulls it: ``pull_latest(20)`` by N
members at the same moment, N threads of one service or N tasks of one ``imbucket.aio``
service. Each round sends one message and releases the herd; what is measured is the
herd's wall time (release to last answer) and, on SQL stores, the statements the store
received. The arms run on the same store, rounds interleaved: pulls coalesced
(``service.coalesce_pulls``) and each pull reading alone.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from imbucket.app import MessageService, open_service
from imbucket.bench.instrument.roundtrips import EngineStatements
from imbucket.domain.model import Draft
from imbucket.domain.projection import Entry, MessageView

ARMS = {"coalesced": True, "alone": False}
APIS = ("threads", "asyncio")
HISTORY = 100  # messages in the group before the first round


@dataclass
class HerdArm:
    """One arm's rounds: the herd's seconds and the store statements of each round."""

    api: str
    arm: str
    members: int
    seconds: list[float] = field(default_factory=list)
    statements: list[int] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        """The median herd's wall time."""
        return statistics.median(self.seconds)

    @property
    def median_statements(self) -> float:
        """The median herd's store statements (0 where they cannot be counted)."""
        return statistics.median(self.statements) if self.statements else 0.0


def run(store: Mapping[str, Any], members: int, rounds: int, api: str) -> list[HerdArm]:
    """Both arms on the store configuration ``store`` (a ``[store]`` table), rounds interleaved."""
    if api == "asyncio":
        return asyncio.run(_run_async(store, members, rounds))
    arms = {name: HerdArm(api, name, members) for name in ARMS}
    services = {name: _open(store, coalesce) for name, coalesce in ARMS.items()}
    try:
        for name, service in services.items():
            _history(service, name)
        for n in range(rounds):
            for name, service in services.items():
                conversation = _conversation(name)
                _sent(service.send(conversation, [_draft(name, n)]))
                _round(arms[name], service, functools.partial(_pull, service, conversation))
    finally:
        for service in services.values():
            service.close()
    return list(arms.values())


def _pull(service: MessageService, conversation: str, viewer: str) -> list[Entry]:
    return service.pull_latest(conversation, viewer, 20)


def _round(arm: HerdArm, service: MessageService, pull: Callable[[str], list[Entry]]) -> None:
    """One herd of threads: released together, timed to the last answer."""
    viewers = [f"member-{n}" for n in range(arm.members)]
    answers: dict[str, list[Entry]] = {}
    release = threading.Barrier(arm.members + 1)

    def member(viewer: str) -> None:
        release.wait()
        answers[viewer] = pull(viewer)

    threads = [threading.Thread(target=member, args=(viewer,)) for viewer in viewers]
    for thread in threads:
        thread.start()
    with _statements(service) as trips:
        release.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        arm.seconds.append(time.perf_counter() - start)
    _check(answers, viewers)
    if trips is not None:
        arm.statements.append(trips.total)


async def _run_async(store: Mapping[str, Any], members: int, rounds: int) -> list[HerdArm]:
    from imbucket.aio import open_service as open_async

    arms = {name: HerdArm("asyncio", name, members) for name in ARMS}
    services = {name: await open_async(_config(store, coalesce)) for name, coalesce in ARMS.items()}
    try:
        for name, service in services.items():
            await service.run(_history, service.service, name)
        viewers = [f"member-{n}" for n in range(members)]
        for n in range(rounds):
            for name, service in services.items():
                conversation = _conversation(name)
                _sent(await service.send(conversation, [_draft(name, n)]))
                with _statements(service.service) as trips:
                    start = time.perf_counter()
                    pulls = [service.pull_latest(conversation, v, 20) for v in viewers]
                    found = await asyncio.gather(*pulls)
                    arms[name].seconds.append(time.perf_counter() - start)
                _check(dict(zip(viewers, found, strict=True)), viewers)
                if trips is not None:
                    arms[name].statements.append(trips.total)
    finally:
        for service in services.values():
            await service.aclose()
    return list(arms.values())


def _config(store: Mapping[str, Any], coalesce: bool) -> dict[str, Any]:
    return {"store": dict(store), "service": {"coalesce_pulls": coalesce}}


def _open(store: Mapping[str, Any], coalesce: bool) -> MessageService:
    return open_service(_config(store, coalesce))


def _conversation(arm: str) -> str:
    return f"sg_herd_{arm}"


def _draft(arm: str, n: int) -> Draft:
    return Draft(send_id="member-0", content=f"round {n}", client_msg_id=f"herd-{arm}-{n}")


def _history(service: MessageService, arm: str) -> None:
    """The group's earlier messages (a pull of the newest 20 reads a full bucket)."""
    drafts = [
        Draft(send_id="member-1", content=f"m{n}", client_msg_id=f"h-{n}") for n in range(HISTORY)
    ]
    service.send(_conversation(arm), drafts)


def _sent(messages: list[Any]) -> int:
    return int(messages[-1].seq)


def _statements(service: MessageService) -> AbstractContextManager[EngineStatements | None]:
    """The store's statements counted, on a SQL store (else nothing is counted)."""
    engine = getattr(service.store, "engine", None)
    return EngineStatements(engine) if engine is not None else nullcontext()


def _check(answers: Mapping[str, list[Entry]], viewers: list[str]) -> None:
    """Every member got an answer whose newest entry is a message."""
    for viewer in viewers:
        entries = answers.get(viewer)
        if not entries or not isinstance(entries[-1], MessageView):
            raise AssertionError(f"{viewer} did not see the new message: {entries!r:.200}")
