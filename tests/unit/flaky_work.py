"""Work for the SQL retry tests: fails a given number of times, then succeeds."""

from __future__ import annotations

from sqlalchemy import Connection


class Flaky:
    """Work that raises error on its first `failures` runs, then returns "done"."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.error = error
        self.failures = failures
        self.runs = 0

    def __call__(self, connection: Connection) -> str:
        self.runs += 1
        if self.runs <= self.failures:
            raise self.error
        return "done"
