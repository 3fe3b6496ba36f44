"""The bulk loader: a dataset into a store by each engine's bulk path, as ``ingest`` leaves it.

The dataset's consumer batches are taken in their arrival order (conversations interleaved,
as ``ingest`` sees them), some ten thousand messages at a time; each chunk's messages are
generated then (never the whole dataset at once) and written:

- PostgreSQL, row layout: ``COPY`` (psycopg's ``cursor.copy``) of the rows the store itself
  builds for those messages;
- every other SQL store and MongoDB: the store's ``insert_many`` (one multi-row INSERT per
  chunk and server limits on MariaDB and PostgreSQL, SQLAlchemy's executemany on SQLite,
  ``insert_many`` / bulk upserts on MongoDB), inside one ``batch`` (transaction).

At the end each conversation's max_seq is raised to the last seq loaded, as ``ingest`` does.
A load may take the dataset's first batches only (``ingest`` then times the rest).
Messages pass ``check_message`` first, like every ingested message (once per run where the
dataset keeps its messages: the run's later loads write the same, already checked, messages).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from imbucket.app.service import MessageService
from imbucket.bench.dataset import Batch, Dataset
from imbucket.domain.model import Message

CHUNK_MESSAGES = 20_000


def chunks(batches: Sequence[Batch], size: int = CHUNK_MESSAGES) -> Iterator[list[Batch]]:
    """Batches in their arrival order, about size messages per chunk."""
    chunk: list[Batch] = []
    count = 0
    for batch in batches:
        chunk.append(batch)
        count += batch.size
        if count >= size:
            yield chunk
            chunk, count = [], 0
    if chunk:
        yield chunk


def load(
    service: MessageService,
    dataset: Dataset,
    advance: Callable[[int], None] = lambda _: None,
    chunk_messages: int = CHUNK_MESSAGES,
    batches: Sequence[Batch] | None = None,
) -> int:
    """Write the messages of batches (default: every batch of dataset) into service's store.

    Returns the messages written. advance is called with each chunk's message count (a
    progress bar). The store must be empty: a bulk load settles no collision with messages
    already stored.
    """
    copy = _copier(service)
    written = 0
    loaded = dataset.batches() if batches is None else batches
    last_seqs: dict[str, int] = {}
    for chunk in chunks(loaded, chunk_messages):
        grouped: dict[str, list[Message]] = {}
        for batch in chunk:
            conv = batch.conversation.id
            last_seqs[conv] = max(last_seqs.get(conv, 0), batch.last)
            grouped.setdefault(conv, []).extend(dataset.checked_messages_of(batch))
        if copy is not None:
            copy(grouped)
        else:
            with service.store.batch():
                service.store.insert_many(grouped)
        count = sum(len(ms) for ms in grouped.values())
        written += count
        advance(count)
    with service.store.batch():  # one commit where the seqs share the store's engine
        for conversation, last in last_seqs.items():
            service.seqs.raise_max_seq(conversation, last)
    return written


def _copier(service: MessageService) -> Callable[[dict[str, list[Message]]], None] | None:
    """COPY of the row store's rows on PostgreSQL; None where the store's insert_many is used."""
    from imbucket.adapters.sql import SqlRowStore

    store = service.store
    if not isinstance(store, SqlRowStore) or store.engine.dialect.name != "postgresql":
        return None
    from imbucket.adapters.sql.row import _message_row

    table = store.schema.messages

    def copy(grouped: dict[str, list[Message]]) -> None:
        rows = [_message_row(conv, m) for conv, ms in grouped.items() for m in ms]
        columns = list(rows[0])  # the columns ingest writes; the others keep their defaults
        names = ", ".join(f'"{name}"' for name in columns)
        connection: Any = store.engine.raw_connection()
        try:
            statement = f"COPY {table.fullname} ({names}) FROM STDIN"
            with connection.cursor() as cursor, cursor.copy(statement) as copying:
                for row in rows:
                    copying.write_row([row[name] for name in columns])
            connection.commit()
        finally:
            connection.close()

    return copy
