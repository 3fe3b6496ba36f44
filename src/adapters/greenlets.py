"""Running the stores' synchronous code on asyncio drivers, as SQLAlchemy's asyncio extension does.

``imbucket.aio`` runs each use case of the one ``MessageService`` inside a greenlet
(``sqlalchemy.util.greenlet_spawn``). Every driver call below it is a coroutine of a native
asyncio driver that the greenlet hands to the event loop and waits for (``await_only``): the
state machines, command builders and projection are the same objects for both APIs. This
module holds what the stores need besides the drivers themselves: whether to open asyncio
drivers, a lock and a sleep that wait on the event loop instead of blocking it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

# Set while imbucket.aio opens a service: the backends it opens then use asyncio drivers.
_ASYNC_DRIVERS: ContextVar[bool] = ContextVar("imbucket_async_drivers", default=False)


@contextmanager
def async_drivers() -> Iterator[None]:
    """Backends opened inside this block use asyncio drivers (and must run in greenlets)."""
    token = _ASYNC_DRIVERS.set(True)
    try:
        yield
    finally:
        _ASYNC_DRIVERS.reset(token)


def asynchronous() -> bool:
    """Whether backends opened now use asyncio drivers (inside ``async_drivers``)."""
    return _ASYNC_DRIVERS.get()


def in_greenlet() -> bool:
    """Whether this code runs in a greenlet that can wait for the event loop."""
    try:
        from sqlalchemy.util.concurrency import in_greenlet as inside
    except ImportError:  # pragma: no cover - SQLAlchemy without its asyncio support
        return False
    try:
        return bool(inside())
    except (ImportError, NotImplementedError):  # no greenlet installed: nothing runs in one
        return False


def wait_for(awaitable: Awaitable[T]) -> T:
    """The result of awaitable, waited for on the event loop driving this greenlet."""
    from sqlalchemy.util import await_only

    return await_only(awaitable)


def pause(seconds: float) -> None:
    """Sleep; inside a greenlet, on the event loop (other tasks run meanwhile)."""
    if in_greenlet():
        wait_for(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


class GreenletLock:
    """A re-entrant lock for code that runs in greenlets of one event loop.

    A thread lock cannot serialise greenlets (they share the thread, so every one of them
    holds it already) and must not block the loop: this one waits on an asyncio lock, and a
    greenlet holding it may take it again.
    """

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._owner: Any = None
        self._depth = 0
        self._guard = threading.Lock()

    def __enter__(self) -> GreenletLock:
        from greenlet import getcurrent

        me = getcurrent()
        if self._owner is me:
            self._depth += 1
            return self
        with self._guard:
            if self._lock is None:
                self._lock = asyncio.Lock()
        wait_for(self._lock.acquire())
        self._owner, self._depth = me, 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            assert self._lock is not None
            self._lock.release()
