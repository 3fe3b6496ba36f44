"""Start work on several threads at the same instant."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
WRITERS = 8


def run_together(count: int, work: Callable[[int], T]) -> list[T]:
    """Run work(0..count-1) on count threads released together by a barrier."""
    barrier = threading.Barrier(count)

    def start(index: int) -> T:
        barrier.wait()
        return work(index)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(start, range(count)))
