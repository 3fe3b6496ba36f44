"""A Rich progress display that runs for the length of a ``with`` block."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.progress import Progress


class LiveProgress:
    """Starts ``self.progress`` on entering the block and stops it on leaving."""

    progress: Progress

    def __enter__(self) -> Self:
        self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.progress.stop()
