"""CacheBindingRecord: where a store records which cache fronts it (domain.cache_binding)."""

from __future__ import annotations

from typing import Protocol


class CacheBindingRecord(Protocol):
    """The store's one cache binding: ``imbucket.domain.cache_binding.NO_CACHE`` or a token.

    It lives with the store's data (same database, same lifetime), so every service that
    opens the store sees the same value. Each method is one atomic step.
    """

    def record(self, binding: str) -> str:
        """Record binding unless one is recorded already; return the recorded one."""
        ...

    def replace(self, expected: str, binding: str) -> bool:
        """Set the binding to binding if it is expected; whether it was."""
        ...
