"""Running the stores' synchronous code on asyncio drivers, as SQLAlchemy's asyncio extension does.

``imbucket.aio`` runs each use case of the one ``MessageService`` inside a greenlet
(``sqlalchemy.util.greenlet_spawn``). Every driver call below it is a coroutine of a native
asyncio driver that the greenlet hands to the event loop and waits for (``await_only``): the
state machines, command builders and projection are the same objects for both APIs. This
module holds what the stores need besides the drivers themselves: a lock and a sleep that
wait on the event loop instead of blocking it, and a sync facade of an asyncio client. Whether
a store opens asyncio drivers is not decided here: the composition root passes
``asynchronous=True`` to the constructors that open them.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
import time
import weakref
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def _optional(module: str, name: str) -> Any:
    """module.name, or None when module cannot be imported (an optional extra not installed)."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None


# greenlet comes with the asyncio extra: whether it is installed is settled once here, since a
# failed import is not cached and would search the path again on every call.
_current_greenlet = _optional("greenlet", "getcurrent")
_sqlalchemy_in_greenlet = _current_greenlet and _optional(
    "sqlalchemy.util.concurrency", "in_greenlet"
)


def in_greenlet() -> bool:
    """Whether this code runs in a greenlet that can wait for the event loop."""
    if not _sqlalchemy_in_greenlet:
        return False
    try:
        return bool(_sqlalchemy_in_greenlet())
    except (ImportError, NotImplementedError):  # SQLAlchemy without its asyncio support
        return False


def wait_for(awaitable: Awaitable[T]) -> T:
    """The result of awaitable, waited for on the event loop driving this greenlet."""
    from sqlalchemy.util import await_only

    return await_only(awaitable)


class TaskLocal:
    """One value per caller, as ``threading.local`` keeps one per thread.

    A caller is a thread, or under imbucket.aio a greenlet: the concurrent calls of an event
    loop share its thread, and must not see each other's value.
    """

    def __init__(self) -> None:
        self._values: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        """The calling thread's or greenlet's value (None when unset)."""
        return self._values.get(_caller())

    def set(self, value: Any) -> None:
        """Set this caller's value (None unsets it)."""
        if value is None:
            self._values.pop(_caller(), None)
        else:
            self._values[_caller()] = value


def _caller() -> Any:
    if _current_greenlet is None:
        return threading.current_thread()
    return _current_greenlet()


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


# Packages whose objects Awaiting wraps: what their asyncio clients hand back.
_ASYNC_CLIENT_MODULES = ("redis.asyncio", "pymongo.asynchronous")


class Awaiting:
    """A synchronous face of an asyncio client, for code written against its sync twin.

    Each method call runs the asyncio method and, when it returns a coroutine, waits for it
    on the event loop (``wait_for``). Objects of the asyncio client it hands back (a database,
    a collection, a cursor, a pipeline, a script) come wrapped the same way; iterating an
    async iterator waits for each step; ``with`` runs ``async with``. Arguments are unwrapped,
    so a facade passed back to the client (a pipeline given to a script) reaches it as the
    asyncio object. Other attributes are read through. ``close`` waits for ``aclose`` (or an
    asynchronous ``close``).
    """

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.target, name)
        return _calling(value) if callable(value) else awaited(value)

    def __getitem__(self, key: Any) -> Any:
        return awaited(self.target[key])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the target (a script), waiting for its coroutine."""
        return _calling(self.target)(*args, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        iterator = self.target.__aiter__()
        while True:
            try:
                item = wait_for(iterator.__anext__())
            except StopAsyncIteration:
                return
            yield awaited(item)

    def __enter__(self) -> Any:
        return awaited(wait_for(self.target.__aenter__()))

    def __exit__(self, *exc_info: Any) -> Any:
        return wait_for(self.target.__aexit__(*exc_info))

    def close(self) -> None:
        """Close the client and its connections."""
        closing = getattr(self.target, "aclose", None) or self.target.close
        awaited(closing())


def unwrap(value: Any) -> Any:
    """The asyncio object behind an Awaiting, else value."""
    return value.target if isinstance(value, Awaiting) else value


def awaited(value: Any) -> Any:
    """A coroutine's result, an asyncio client's object behind Awaiting, else value."""
    if inspect.iscoroutine(value) or asyncio.isfuture(value):
        return awaited(wait_for(value))
    module = type(value).__module__
    wrapped = module.startswith(_ASYNC_CLIENT_MODULES) or type(value).__name__ == "AsyncScript"
    if wrapped or inspect.isasyncgen(value):
        return Awaiting(value)
    return value


def _calling(method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(unwrap(arg) for arg in args)
        kwargs = {key: unwrap(arg) for key, arg in kwargs.items()}
        return awaited(method(*args, **kwargs))

    return call
