"""Count the round trips a MessageService makes, whatever backend it runs on.

Server engines are counted at their drivers (``adapters.roundtrips``). The in-process memory
engines have no driver: their BucketRepository and SeqStore calls count instead, since each
call stands for one round trip on a real engine (see the BucketRepository port).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from adapters import roundtrips
from adapters.memory import MemoryBucketRepository, MemorySeqStore
from adapters.roundtrips import Count, RoundTrips

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
_OUR_PACKAGES = ("adapters.", "app.")


class _Counted:
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


def _fields(obj: object) -> list[str]:
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names += [n for n in getattr(cls, "__slots__", ()) if n not in names]
    return names


def _wrap_memory(root: object, counter: RoundTrips) -> list[tuple[object, str, object]]:
    """Replace in-process engines reachable from root by counting proxies; returns undo info."""
    swapped: list[tuple[object, str, object]] = []
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        for name in _fields(obj):
            value = getattr(obj, name, None)
            if isinstance(value, MemoryBucketRepository | MemorySeqStore):
                try:
                    setattr(obj, name, _Counted(value, counter))
                except (AttributeError, TypeError):  # frozen holder: its owner is wrapped
                    continue
                swapped.append((obj, name, value))
            elif type(value).__module__.startswith(_OUR_PACKAGES):
                todo.append(value)
    return swapped


class Probe:
    """Counts driver round trips while open, plus those of attached in-process engines."""

    def __init__(self) -> None:
        self.round_trips = RoundTrips()
        self._swapped: list[tuple[object, str, object]] = []

    def attach(self, service: object) -> None:
        """Also count the memory engines reachable from service (a MessageService)."""
        self._swapped += _wrap_memory(service, self.round_trips)

    def count(self, operation: Callable[[], object]) -> Count:
        """Run operation and return its round trips."""
        before = self.round_trips.snapshot()
        operation()
        return self.round_trips.snapshot() - before

    def detach(self) -> None:
        """Put the original engines back."""
        while self._swapped:
            obj, name, original = self._swapped.pop()
            setattr(obj, name, original)


@contextmanager
def probing() -> Iterator[Probe]:
    """A Probe counting every driver round trip made inside the block.

    Open MongoDB-backed services inside the block (pymongo reports only to clients created
    after its listener is registered), and ``attach`` each service to count memory engines.
    """
    probe = Probe()
    try:
        with roundtrips.watch(probe.round_trips):
            yield probe
    finally:
        probe.detach()
