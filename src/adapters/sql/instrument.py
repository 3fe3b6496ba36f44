"""Round-trip counting for SQL stores, through SQLAlchemy's ``before_cursor_execute`` event.

Usage (tests and the benchmark)::

    with RoundTrips(service.store.engine) as trips:
        service.pull_latest(conversation, viewer)
    trips.total, trips.reads, trips.writes, trips.statements

Each statement sent to the server counts once; transaction control (BEGIN, COMMIT, ROLLBACK,
SAVEPOINT) is not counted.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from sqlalchemy import Engine, event

from adapters.roundtrips import sql_is_control, sql_is_write


class RoundTrips:
    """Counts the data statements an engine sends while attached (a context manager)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.statements: list[str] = []
        self._lock = threading.Lock()

    def __enter__(self) -> RoundTrips:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)

    @property
    def total(self) -> int:
        """Statements sent."""
        return len(self.statements)

    @property
    def writes(self) -> int:
        """Statements that change rows (INSERT, UPDATE, DELETE, …)."""
        return sum(1 for statement in self.statements if sql_is_write(statement))

    @property
    def reads(self) -> int:
        """Statements that only read."""
        return self.total - self.writes

    def reset(self) -> None:
        """Forget what was counted so far."""
        with self._lock:
            self.statements.clear()

    def _seen(
        self,
        connection: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        if not sql_is_control(statement):
            with self._lock:
                self.statements.append(statement)
