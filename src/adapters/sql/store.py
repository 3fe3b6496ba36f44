"""What the two SQL stores share beside their state machines (sql-row and sql-bucket).

``SqlStore`` is a mixin placed before ``RowMessageStore`` or ``BucketMessageStore``: it runs
a ``batch`` on the repository's database, shows the tables and the engine to the
instrumentation, and gives both stores one ``mark_read_raising`` (``RaisingStore``), the
first round trip of ``SqlReadMarks``: the read that also raises the reader's read seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Generic, Protocol, TypeVar

from sqlalchemy.engine import Engine

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.read_marks import Raised
from imbucket.domain.tags import Decision, Guard, marking_read

SchemaT = TypeVar("SchemaT")
SchemaT_co = TypeVar("SchemaT_co", covariant=True)
Found = TypeVar("Found")


class SqlRepository(Protocol[SchemaT_co]):
    """The repository of a SQL store: its database and its tables."""

    @property
    def db(self) -> Database:
        """The database every statement of the repository runs on."""
        ...

    @property
    def schema(self) -> SchemaT_co:
        """The repository's tables."""
        ...


class SqlStore(Generic[SchemaT, Found]):
    """The part of a SQL store that does not depend on its layout.

    A store fills in ``_read_raising`` (one statement) and ``_mark_found`` (the tag writes
    after it); Found is what the first hands the second.
    """

    repository: SqlRepository[SchemaT]

    def batch(self) -> AbstractContextManager[None]:
        """One transaction for the block's writes; see MessageStore.batch."""
        return self.repository.db.batch()

    @property
    def schema(self) -> SchemaT:
        """The tables (for the benchmark's raw-driver arm and its maintenance step)."""
        return self.repository.schema

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for instrumentation such as round-trip counting)."""
        return self.repository.db.engine

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> tuple[int, bool]:
        """mark_read whose read also raises reader_id's read seq (``SqlReadMarks``).

        seqs is not empty. Returns how many seqs changed and whether the read seq was raised
        to ``max(seqs)`` (not when that seq was beyond the max_seq read: see ``Raised``).
        """
        found, raised = self._read_raising(conversation_id, seqs, reader_id, max(seqs))
        decide = marking_read(reader_id)
        changed = self._mark_found(found, conversation_id, seqs, decide, raised.guard(guard))
        return changed, raised.raised

    def _read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, seq: int
    ) -> tuple[Found, Raised]:
        """The slots of seqs, read in the statement that raises reader_id's read seq to seq."""
        raise NotImplementedError

    def _mark_found(
        self,
        found: Found,
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
    ) -> int:
        """The tag writes of seqs after ``_read_raising`` read found; how many changed."""
        raise NotImplementedError
