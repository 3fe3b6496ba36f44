"""The raw-driver arm of the benchmark: pull_latest(20) on sql-row as one hand-written query."""

from __future__ import annotations

from typing import Any


class RawRowLatest:
    """Placeholder until the sql-row schema lands."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """The newest count rows the viewer may see."""
        raise NotImplementedError
