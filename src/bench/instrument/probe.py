"""Count the round trips a MessageService makes, whatever backend it runs on.

Server engines are counted at their drivers (``bench.instrument.roundtrips``). The in-process
memory engine has no driver: its BucketRepository and SeqStore calls count instead, since each
call stands for one round trip on a real engine (see the BucketRepository port). They are
counted by wrappers the container builds the memory backend with (a provider override), so
nothing is patched after the service is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from dependency_injector import providers

from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app import open_container
from imbucket.app.backends import Backend, memory_over
from imbucket.app.service import MessageService
from imbucket.bench.instrument import roundtrips
from imbucket.bench.instrument.roundtrips import Count, RoundTrips
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.ports.bucket_repository import BucketRepository
from imbucket.ports.seq_store import SeqStore

_MEMORY_READS = frozenset(
    {
        "read",
        "read_viewed",
        "read_spilled",
        "stats",
        "max_seq",
        "min_seq",
        "user_min_seq",
        "read_seq",
        "watermarks",
    }
)


class Counted:
    """Forwards to an in-process engine, counting each public method call as a round trip."""

    def __init__(self, target: object, counter: RoundTrips) -> None:
        self._target = target
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or name == "close" or not callable(value):
            return value
        counter, write = self._counter, name not in _MEMORY_READS

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.record("memory", write)
            return value(*args, **kwargs)

        return counted


def counted_memory(layout: BucketLayout, budget: TagBudget, counter: RoundTrips) -> Backend:
    """The memory backend of ``imbucket.app.backends.memory``, its engines counted into counter."""
    repository = cast(BucketRepository, Counted(MemoryBucketRepository(layout), counter))
    seqs = cast(SeqStore, Counted(MemorySeqStore(), counter))
    return memory_over(repository, seqs, budget)


class Probe:
    """Counts driver round trips while open, and those of the memory services it opens."""

    def __init__(self) -> None:
        self.round_trips = RoundTrips()

    def open_service(self, config: Mapping[str, Any] | None = None) -> MessageService:
        """``app.open_service``, with a memory backend's engines counted by this probe."""
        container = open_container(config)
        if container.settings().store.backend == "memory":
            container.backend.override(
                providers.Singleton(
                    counted_memory,
                    layout=container.layout,
                    budget=container.budget,
                    counter=providers.Object(self.round_trips),
                )
            )
        service: MessageService = container.service()
        return service

    def count(self, operation: Callable[[], object]) -> Count:
        """Run operation and return its round trips."""
        before = self.round_trips.snapshot()
        operation()
        return self.round_trips.snapshot() - before


@contextmanager
def probing() -> Iterator[Probe]:
    """A Probe counting every driver round trip made inside the block.

    Open MongoDB-backed services inside the block (pymongo reports only to clients created
    after its listener is registered), with ``Probe.open_service`` to count memory engines.
    """
    probe = Probe()
    with roundtrips.watch(probe.round_trips):
        yield probe
