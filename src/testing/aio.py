"""The contract suite on ``imbucket.aio``: the same test functions, through a blocking facade.

``BlockingService`` has MessageService's methods; each use case is a coroutine of an
``AsyncMessageService`` run on an event loop in a helper thread (``LoopThread``) and waited
for, so threads of a test are concurrent tasks on that loop. What a test reaches behind the
service (``service.store``, ``service.seqs``, ``service.views``) is the async service's own
store objects, behind ``OnLoop``: each call runs in a greenlet on the loop, where the
asyncio drivers can be awaited.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from imbucket.adapters.asyncio_bridge import in_greenlet, wait_for
from imbucket.app.aio import AsyncMessageService, open_service

T = TypeVar("T")

# Module prefixes whose objects are store internals to reach through OnLoop.
_INTERNAL = ("imbucket.adapters", "imbucket.app")


class LoopThread:
    """An event loop running in a daemon thread, for callers that block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="imbucket-aio"
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, run on the loop (awaited in place when called on it)."""
        if self._on_loop():
            # Code that already runs in a greenlet on the loop (a test's injected callback).
            return wait_for(coroutine)
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def call(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """work(*args, **kwargs) in a greenlet on the loop (in place when already there)."""
        if self._on_loop() and in_greenlet():
            return work(*args, **kwargs)
        from sqlalchemy.util import greenlet_spawn

        return self.run(greenlet_spawn(work, *args, **kwargs))

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def _on_loop(self) -> bool:
        return threading.current_thread() is self._thread


class OnLoop:
    """An object whose method calls (and their iterators and context managers) run on loop.

    Setting an attribute sets it on the object itself (tests wrap store primitives).
    """

    def __init__(self, target: Any, loop: LoopThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        return on_loop(getattr(self._target, name), self._loop)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, unwrapped(value))

    def __enter__(self) -> Any:
        return on_loop(self._loop.call(self._target.__enter__), self._loop)

    def __exit__(self, *exc_info: Any) -> Any:
        return self._loop.call(self._target.__exit__, *exc_info)

    def __iter__(self) -> Iterator[Any]:
        iterator = self._loop.call(iter, self._target)
        while True:
            try:
                yield self._loop.call(next, iterator)
            except StopIteration:
                return


def on_loop(value: Any, loop: LoopThread) -> Any:
    """value, reachable from any thread: store internals and their results behind OnLoop."""
    if inspect.ismethod(value) or inspect.isfunction(value):
        return _calling(value, loop)
    if inspect.isgenerator(value) or hasattr(value, "__exit__"):
        return OnLoop(value, loop)
    if type(value).__module__.startswith(_INTERNAL):
        return OnLoop(value, loop)
    return value


def unwrapped(value: Any) -> Any:
    """The object behind an OnLoop, else value."""
    return object.__getattribute__(value, "_target") if isinstance(value, OnLoop) else value


def _calling(method: Callable[..., Any], loop: LoopThread) -> Callable[..., Any]:
    def called(*args: Any, **kwargs: Any) -> Any:
        return on_loop(loop.call(method, *args, **kwargs), loop)

    return called


class BlockingService:
    """MessageService's methods over an AsyncMessageService run on a LoopThread."""

    def __init__(self, service: AsyncMessageService, loop: LoopThread) -> None:
        object.__setattr__(self, "aio", service)
        object.__setattr__(self, "_loop", loop)

    @classmethod
    def open(cls, config: Mapping[str, Any], loop: LoopThread) -> BlockingService:
        """The async service of config, opened on loop."""

        async def opened() -> AsyncMessageService:
            return await open_service(config)

        return cls(loop.run(opened()), loop)

    def __getattr__(self, name: str) -> Any:
        use_case = getattr(AsyncMessageService, name, None)
        if inspect.iscoroutinefunction(use_case):
            method = getattr(self.aio, name)
            return lambda *args, **kwargs: self._loop.run(method(*args, **kwargs))
        return on_loop(getattr(self.aio.service, name), self._loop)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.aio.service, name, unwrapped(value))

    def close(self) -> None:
        """Close the async service."""
        self._loop.run(self.aio.aclose())

    def __enter__(self) -> BlockingService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
