"""mark_read in two round trips on SQL: the read-seq raise rides on the tag write's read.

The slots a mark-read reads and the reader's read seq live in one database, so the first
statement of the write is an upsert of the reader's read seq whose ``RETURNING`` carries the
conversation's max_seq and the read itself, aggregated into one JSON value (a scalar
subquery): ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` on PostgreSQL and SQLite,
``INSERT … ON DUPLICATE KEY UPDATE … RETURNING`` on MariaDB (10.5+). The second statement
is the tag write, as for every tag write. The raise lands only while the seq is allocated
(``seq <= max_seq``, checked in the same statement), so a write the allocation check will
refuse raises nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Insert, Subquery, bindparam, case, func, literal, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.dml import ReturningInsert

from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.schema import Schema, check_keys
from imbucket.domain.tags import Guard, checked_beyond
from imbucket.ports.seq_store import SeqStore


class RaisingStore(Protocol):
    """A store whose mark-read can carry the read-seq raise (sql-row, sql-bucket)."""

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None = None
    ) -> int:
        """MessageStore.mark_read."""
        ...

    def mark_read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> tuple[int, bool]:
        """mark_read, raising reader_id's read seq to max(seqs) in its read (if allocated).

        Returns how many seqs changed and whether the read seq was raised.
        """
        ...


@dataclass(frozen=True, slots=True)
class Raised:
    """What the read-seq raise riding on a read found: max_seq, and whether it landed."""

    max_seq: int
    raised: bool

    def guard(self, guard: Guard | None) -> Guard | None:
        """guard, called only when a seq found empty is beyond the max_seq read here."""
        return checked_beyond(guard, self.max_seq)


def raising_read_seq(
    db: Database,
    schema: Schema,
    conversation_id: str,
    user_id: str,
    seq: int,
    carried: ColumnElement[Any],
) -> ReturningInsert[Any]:
    """The upsert raising user_id's read seq to seq iff seq <= max_seq.

    It returns one row: (max_seq, carried).
    """
    check_keys(conversation_id, user_id)
    users, seqs = schema.user_seqs, schema.seqs
    max_seq = func.coalesce(
        select(seqs.c.max_seq)
        .where(seqs.c.conversation_id == literal(conversation_id))
        .scalar_subquery(),
        0,
    )
    value = case((literal(seq) <= max_seq, literal(seq)), else_=literal(0))
    # Named apart: the carried read binds its own conversation_id.
    values: dict[str, ColumnElement[Any]] = {
        "conversation_id": bindparam("raised_conversation_id", conversation_id),
        "user_id": bindparam("raised_user_id", user_id),
        "read_seq": value,
    }
    upsert: Insert
    if db.kind == "mariadb":
        insert = mysql.insert(users).values(values)
        upsert = insert.on_duplicate_key_update(
            {"read_seq": db.greatest(users.c.read_seq, insert.inserted.read_seq)}
        )
    else:
        insert = (postgresql if db.kind == "postgresql" else sqlite).insert(users).values(values)
        upsert = insert.on_conflict_do_update(
            index_elements=[users.c.conversation_id, users.c.user_id],
            set_={"read_seq": db.greatest(users.c.read_seq, insert.excluded.read_seq)},
        )
    return upsert.returning(max_seq, carried)


def aggregated(
    db: Database, rows: Subquery, json_columns: Sequence[str] = (), text_columns: Sequence[str] = ()
) -> Any:
    """The rows of a subquery as one JSON array of arrays (a scalar subquery).

    json_columns hold JSON the engine built (kept as JSON, not quoted as text); next to
    them MariaDB needs text_columns in the JSON's collation.
    """
    columns: list[Any] = []
    for column in rows.c:
        if column.name in json_columns and db.kind == "sqlite":
            columns.append(func.json(column))
        elif column.name in json_columns and db.kind == "mariadb":
            columns.append(func.JSON_EXTRACT(column, "$"))
        elif column.name in text_columns and db.kind == "mariadb":
            columns.append(column.collate("utf8mb4_bin"))
        else:
            columns.append(column)
    if db.kind == "postgresql":
        whole = func.json_agg(func.json_build_array(*columns))
    elif db.kind == "sqlite":
        whole = func.json_group_array(func.json_array(*columns))
    else:
        whole = func.JSON_ARRAYAGG(func.JSON_ARRAY(*columns))
    return select(whole).select_from(rows).scalar_subquery()


def carried_rows(value: Any) -> list[list[Any]]:
    """The rows of ``aggregated`` as the driver returned them (text, decoded, or NULL)."""
    if value is None:
        return []
    decoded = json.loads(value) if isinstance(value, str | bytes) else value
    return list(decoded)


class SqlReadMarks:
    """``ReadMarks`` of sql-row and sql-bucket: the tag write's two round trips.

    The store's ``mark_read_raising`` reads the slots and raises the read seq in one
    statement, then writes the tags. When the raise could not land in it (a seq beyond the
    max_seq it read: the allocation check then refuses the write, or a message stored
    before its seq's max_seq was raised), the seq store raises it on its own afterwards.
    """

    def __init__(self, store: RaisingStore, seqs: SeqStore) -> None:
        self.store = store
        self.seqs = seqs

    def mark_read(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, guard: Guard | None
    ) -> int:
        """See ``imbucket.ports.read_marks.ReadMarks.mark_read``."""
        if not seqs:
            return self.store.mark_read(conversation_id, seqs, reader_id, guard)
        changed, raised = self.store.mark_read_raising(conversation_id, seqs, reader_id, guard)
        if not raised:
            self.seqs.raise_read_seq(conversation_id, reader_id, max(seqs))
        return changed
