"""Calls that must return: the fault and timeout tests' hard cap on a blocked call."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Far above every bound the tests configure (and above 30 s, the bound with default settings).
HARD_CAP_SECONDS = 90


def returned(call: Callable[[], T]) -> T | BaseException:
    """call's result or error; fails the test if call is still blocked at the hard cap."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HARD_CAP_SECONDS)
    assert not thread.is_alive(), f"the call was still blocked after {HARD_CAP_SECONDS} s"
    return outcome[0]  # type: ignore[no-any-return]
