"""sql-bucket's message writes: filling free slots, or creating the bucket holding them.

A fill is a conditional UPDATE of the bucket's ``msgs`` whose WHERE clause holds each named
slot free (no message, not purged): a taken slot or a missing bucket shows up as "0 rows
updated". Where the engine's upsert can tell a bucket it wrote from one it left alone
(``JsonSql.fill_or_create_sql``), the first write of an insert fills or creates the bucket
in one statement, and on SQLite every bucket of the insert in one statement
(``fill_or_create_many``). MariaDB's cannot: there a bucket whose slot 0 is pending, most
likely a new one, is created first and filled only if it was there (docs/sql.md).
``SqlBucketRepository`` inherits these primitives of the BucketRepository port.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Executable
from sqlalchemy.sql.elements import TextClause

from imbucket.adapters.codec import conversation_of
from imbucket.adapters.sql.bucket_json import json_text
from imbucket.adapters.sql.bucket_writes import (
    ROW_SQL_BYTES,
    SLOT_SQL_BYTES,
    BucketTagWrites,
    all_of,
    any_of,
)
from imbucket.adapters.sql.json_sql import Path
from imbucket.adapters.sql.prepared import PreparedTexts
from imbucket.adapters.sql.schema import check_key
from imbucket.adapters.sql.sizing import STATEMENT_OVERHEAD, batches, value_bytes
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Message, Slot

# The fill statements kept, by slot indexes (a send's batch nearly always fills one slot).
_MOST_FILLS = 1024

Shape = tuple[int, ...]  # the slot indexes a fill writes, in slot order


class BucketFills(BucketTagWrites):
    """The message writes of one bucket table (a base of ``SqlBucketRepository``)."""

    layout: BucketLayout
    _texts: PreparedTexts
    _empty_texts: list[str]  # the JSON text of an empty slot, once per slot of a bucket
    _fills: dict[tuple[Shape | int, str | None], str]
    _many_fills: dict[tuple[Shape, ...], str]

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Insert the whole bucket; False when doc_id exists (``SqlBucketRepository``)."""
        raise NotImplementedError

    def write_messages(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """Fill the named slots iff the bucket exists and all of them are free.

        Messages too large for one statement go in several UPDATEs in one transaction, all
        or nothing (docs/sql.md, "Statement limits").
        """
        return self._write_docs(doc_id, self._message_docs(messages))

    def fill_or_create(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """``write_messages``, or the bucket created holding messages if it does not exist.

        One statement either way. False when the bucket exists with one of those slots taken,
        or another writer created it meanwhile: read it, as after ``write_messages``. Where
        the engine has no such statement, the bucket is created first when slot 0 is among
        the messages' (a seq opening a bucket: most likely a new one), and filled only if it
        is there already; else, or when the messages need more than one statement, this is
        ``write_messages``.
        """
        template = self._json.fill_or_create_sql
        if template is None:
            if 0 in messages:
                fresh = {index: Slot(message=m) for index, m in messages.items()}
                if self.create_bucket(doc_id, fresh):
                    return True
            return self.write_messages(doc_id, messages)
        docs, whole = self._fresh_docs(messages)
        size = value_bytes(whole) + sum(value_bytes(d) + SLOT_SQL_BYTES for d in docs.values())
        if size + STATEMENT_OVERHEAD > self.db.limits().max_bytes:
            return self._write_docs(doc_id, docs)
        check_key(conversation_of(doc_id), "conversation_id")
        sql = self._fill_sql(tuple(docs), template)
        params = self._fill_params(docs)
        found = self.db.fetch(self._texts.get(sql), {"doc_id": doc_id, "whole": whole, **params})
        return len(found) == 1

    def fill_or_create_many(self, buckets: Mapping[str, Mapping[int, Message]]) -> set[str] | None:
        """``fill_or_create`` of several buckets (messages by slot index, by doc_id) at once.

        One statement: the doc_ids it filled or created. A bucket left out is one whose
        slots were not all free, or that another writer created meanwhile: read it, as after
        ``write_messages``. None (nothing written) where the engine has no such statement
        (``JsonSql.fill_or_create_many_sql``) or the buckets need more than one.
        """
        template = self._json.fill_or_create_many_sql
        if template is None:
            return None
        params: dict[str, Any] = {}
        shapes: list[Shape] = []
        size = STATEMENT_OVERHEAD
        for b, (doc_id, messages) in enumerate(buckets.items()):
            check_key(conversation_of(doc_id), "conversation_id")
            docs, whole = self._fresh_docs(messages)
            shapes.append(tuple(docs))
            params.update({f"d{b}": doc_id, f"w{b}": whole})
            params.update({f"b{b}m{n}": doc for n, doc in enumerate(docs.values())})
            size += value_bytes(whole) + value_bytes(doc_id) + ROW_SQL_BYTES
            size += sum(value_bytes(d) + SLOT_SQL_BYTES for d in docs.values())
        limits = self.db.limits()
        if size > limits.max_bytes or len(params) > limits.max_params:
            return None
        sql = self._fill_many_sql(tuple(shapes), template)
        return {str(row[0]) for row in self.db.fetch(self._texts.get(sql), params)}

    def _fresh_docs(self, messages: Mapping[int, Message]) -> tuple[dict[int, str], str]:
        """The JSON of each message by slot index, and of the bucket holding them alone."""
        msg, to_doc = self._codec.keys["msg"], self._codec.to_doc
        docs: dict[int, str] = {}
        texts = list(self._empty_texts)
        for index, message in sorted(messages.items()):
            slot_doc = to_doc(Slot(message=message))
            docs[index] = json_text(slot_doc[msg])
            texts[index] = json_text(slot_doc)
        # What ``whole`` writes: the slots' JSON, comma-separated, without building them again.
        return docs, f"[{','.join(texts)}]"

    def _message_docs(self, messages: Mapping[int, Message]) -> dict[int, str]:
        """The JSON of each message by slot index, in slot order."""
        message_doc = self._codec.message_doc
        return {index: json_text(message_doc(m)) for index, m in sorted(messages.items())}

    def _write_docs(self, doc_id: str, docs: Mapping[int, str]) -> bool:
        """``write_messages`` of message JSON docs by slot index."""
        parts = self._parts(docs)
        if len(parts) == 1:
            check_key(conversation_of(doc_id), "conversation_id")
            sql = self._fill_sql(tuple(parts[0]), None)
            params = self._fill_params(parts[0])
            update = self._texts.get(sql)
            return self.db.write(update, {"doc_id": doc_id, **params}).rowcount == 1
        return self._all_or_nothing([self._filling(doc_id, part) for part in parts])

    def _fill_sql(self, indexes: Shape, template: str | None) -> str:
        """The SQL filling the slots at indexes with ``:m0``, ``:m1``… iff all are free.

        template None: the UPDATE of ``write_messages``; else ``fill_or_create_sql``. Kept
        per shape, so that a send builds no SQL text. Where the engine takes bound paths,
        the slots' paths are bound too (``_fill_params``): one statement per count of
        slots, whichever they are, which the engine prepares once.
        """
        bound = self._json.bound_field_sql is not None
        key = (len(indexes) if bound else indexes, template)
        sql = self._fills.get(key)
        if sql is None:
            if bound:
                document, free = self._filled_at(len(indexes))
            else:
                changes, free, _ = self._filled(dict.fromkeys(indexes, ""))
                document = self._json.set(changes)
            if template is None:
                sql = self._update_document_sql(document, free)
            else:
                where = all_of(["doc_id = :doc_id", *free])
                sql = template.format(table=self._table, document=document, where=where)
            if len(self._fills) >= _MOST_FILLS:
                self._fills.clear()
            self._fills[key] = sql
        return sql

    def _fill_many_sql(self, shapes: tuple[Shape, ...], template: str) -> str:
        """The SQL of ``fill_or_create_many``: bucket b is ``:d<b>``, whole ``:w<b>``.

        Its messages are ``:b<b>m0``, ``:b<b>m1``… Kept per shape, as ``_fill_sql``.
        """
        sql = self._many_fills.get(shapes)
        if sql is None:
            rows: list[str] = []
            cases: list[str] = []
            where: list[str] = []
            for b, indexes in enumerate(shapes):
                changes, free, _ = self._filled(dict.fromkeys(indexes, ""), f"b{b}m")
                rows.append(f"(:d{b}, :w{b})")
                cases.append(f"WHEN :d{b} THEN {self._json.set(changes)}")
                where.append(all_of([f"doc_id = :d{b}", *free]))
            document = f"CASE doc_id {' '.join(cases)} ELSE msgs END"
            sql = template.format(
                table=self._table, rows=", ".join(rows), document=document, where=any_of(where)
            )
            if len(self._many_fills) >= _MOST_FILLS:
                self._many_fills.clear()
            self._many_fills[shapes] = sql
        return sql

    def _filling(self, doc_id: str, docs: Mapping[int, str]) -> TextClause:
        """UPDATE storing message JSON docs by slot index iff every one of those slots is free."""
        return self._updating(doc_id, *self._filled(docs))

    def _filled_at(self, count: int) -> tuple[str, list[str]]:
        """The document and conditions of a fill of count slots at bound paths.

        Message n is ``:m<n>``, the path to its slot's message ``:m<n>m`` and to its purge
        mark ``:m<n>p`` (``_fill_params``).
        """
        json = self._json
        changes = [(f"m{n}m", json.value(f"m{n}")) for n in range(count)]
        free = [
            c for n in range(count) for c in (json.is_null_at(f"m{n}m"), json.is_false_at(f"m{n}p"))
        ]
        return json.set_at(changes), free

    def _fill_params(self, docs: Mapping[int, str]) -> dict[str, Any]:
        """The parameters of ``_fill_sql``'s statement for docs (message JSON by slot index)."""
        params: dict[str, Any] = {}
        bound = self._json.bound_field_sql is not None
        for n, (index, doc) in enumerate(docs.items()):
            params[f"m{n}"] = doc
            if bound:
                params[f"m{n}m"] = self._json.path_text(index, "msg")
                params[f"m{n}p"] = self._json.path_text(index, "purged")
        return params

    def _filled(
        self, docs: Mapping[int, str], prefix: str = "m"
    ) -> tuple[list[tuple[Path, str]], list[str], dict[str, Any]]:
        """What fills message JSON docs by slot index: changes, conditions, parameters.

        The conditions hold iff every one of those slots is free. The n-th doc is bound as
        prefix + n.
        """
        params: dict[str, Any] = {}
        changes: list[tuple[Path, str]] = []
        free: list[str] = []
        for n, (index, doc) in enumerate(docs.items()):
            params[f"{prefix}{n}"] = doc
            changes.append(((index, "msg"), self._json.value(f"{prefix}{n}")))
            free += [self._json.is_null(index, "msg"), self._json.is_false(index, "purged")]
        return changes, free, params

    def _parts(self, docs: Mapping[int, str]) -> list[dict[int, str]]:
        """Docs (JSON by slot index) in parts each small enough for one statement."""
        items = list(docs.items())
        sizes = [value_bytes(doc) + SLOT_SQL_BYTES for _, doc in items]
        return [dict(part) for part in batches(items, sizes, 1, self.db.limits())] or [{}]

    def _all_or_nothing(self, statements: Sequence[Executable]) -> bool:
        """Run statements in one transaction; unless each changes its one row, none is kept."""

        def work(connection: Connection) -> bool:
            for statement in statements:
                if connection.execute(statement).rowcount != 1:
                    raise _Missed
            return True

        try:
            return self.db.run(work, atomic=True)
        except _Missed:
            return False


class _Missed(Exception):
    """A statement of an all-or-nothing write changed no row: the transaction is undone."""
