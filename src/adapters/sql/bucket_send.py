"""sql-bucket's part of a fresh send's one statement on PostgreSQL (``adapters.sql.send``).

``SqlFreshSends`` composes the counter upsert, the claims and the INSERT given here into one
data-modifying CTE, as it does with sql-row's rows. The messages travel as one JSON array
bound per call; the statement numbers them from the allocated base, groups them by bucket
and upserts each bucket: a missing bucket is created holding them, an existing one gets
them in its slots only when every one of those slots is free (no message, not purged),
else that bucket is left as it was and the step reports fewer buckets written, as sql-row
reports fewer rows. The SQL text is the same whatever the batch's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imbucket.adapters.codec import SlotCodec
from imbucket.adapters.sql.bucket_json import json_text
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.schema import check_keys
from imbucket.adapters.sql.sizing import STATEMENT_OVERHEAD, value_bytes
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import EMPTY_SLOT, Message

_EMPTY = "CAST(:bucket_empty AS jsonb)"  # an empty slot in the encoding
# The most bytes of message JSON one fresh send binds (as for sql-row's rows: one array
# literal the server parses whole).
FRESH_BYTES = 1 << 20


class FreshBuckets:
    """The fresh-send INSERT of one bucket table on PostgreSQL, and its values."""

    def __init__(self, db: Database, layout: BucketLayout, codec: SlotCodec, table: str) -> None:
        self.db = db
        self.layout = layout
        self._codec = codec
        self._table = table
        self._empty_slot = json_text(codec.to_doc(EMPTY_SLOT))
        self._empty_whole = json_text([codec.to_doc(EMPTY_SLOT)] * layout.size)
        # A codec whose stored message holds its own seq (OpenIM's) gets it set in SQL.
        probe = codec.message_doc(Message("probe", 1, "probe", "probe", ""))
        self._seq_inside = isinstance(probe, dict) and "seq" in probe

    def insert_sql(self, base: str, single: bool = False) -> str:
        """The upsert of the buckets of the messages bound by ``binds``, numbered from base.

        base is an SQL expression giving the seq before the first message. It returns one
        row per bucket written (``rows_written`` tells how many make the whole send).
        single: the text for exactly one message, which sets its one slot in place as the
        store's fill does, where several rebuild each bucket's array in one pass.
        """
        if single:
            return self._single_sql(base)
        size, key = self.layout.size, self._codec.key("msg")
        numbered = (
            f"SELECT {base} + i.n - 1 AS s, {self._doc('i.doc', f'{base} + i.n')} AS doc"
            " FROM jsonb_array_elements(CAST(:bucket_docs AS jsonb)) WITH ORDINALITY AS i(doc, n)"
        )
        grouped = (
            f"SELECT f.s / {size} AS d,"
            f" jsonb_object_agg(CAST(mod(f.s, {size}) AS text), f.doc) AS docs"
            f" FROM ({numbered}) AS f GROUP BY f.s / {size}"
        )
        new_slot = "k.docs -> CAST(g - 1 AS text)"
        whole = (
            f"(SELECT jsonb_agg(CASE WHEN {new_slot} IS NULL THEN {_EMPTY}"
            f" ELSE jsonb_set({_EMPTY}, '{{{key}}}', {new_slot}) END ORDER BY g)"
            f" FROM generate_series(1, {size}) AS g)"
        )
        pairs = (
            "jsonb_array_elements(b.msgs) WITH ORDINALITY AS e(slot, n)"
            " JOIN jsonb_array_elements(EXCLUDED.msgs) WITH ORDINALITY AS x(slot, n) USING (n)"
        )
        arriving = f"jsonb_typeof(x.slot -> '{key}') = '{self._codec.message_type}'"
        merged = (
            f"(SELECT jsonb_agg(CASE WHEN {arriving} THEN jsonb_set(e.slot, '{{{key}}}',"
            f" x.slot -> '{key}') ELSE e.slot END ORDER BY e.n) FROM {pairs})"
        )
        return (
            f"INSERT INTO {self._table} AS b (doc_id, msgs)"
            f" SELECT :bucket_conversation_id || ':' || CAST(k.d AS text), {whole}"
            f" FROM ({grouped}) AS k"
            f" ON CONFLICT (doc_id) DO UPDATE SET msgs = {merged}"
            f" WHERE NOT EXISTS (SELECT 1 FROM {pairs}"
            f" WHERE {arriving} AND NOT ({self._free('e.slot')}))"
            " RETURNING 1"
        )

    def _single_sql(self, base: str) -> str:
        """``insert_sql`` for one message: its bucket created around it, or its slot filled."""
        size, key = self.layout.size, self._codec.key("msg")
        slot = f"CAST(mod({base}, {size}) AS int)"
        doc = self._doc("CAST(:bucket_docs AS jsonb) -> 0", f"{base} + 1")
        whole = (
            f"jsonb_set(CAST(:bucket_whole AS jsonb), ARRAY[CAST({slot} AS text)],"
            f" jsonb_set({_EMPTY}, '{{{key}}}', {doc}))"
        )
        return (
            f"INSERT INTO {self._table} AS b (doc_id, msgs)"
            f" VALUES (:bucket_conversation_id || ':' || CAST({base} / {size} AS text), {whole})"
            f" ON CONFLICT (doc_id) DO UPDATE SET msgs = jsonb_set(b.msgs,"
            f" ARRAY[CAST({slot} AS text), '{key}'], EXCLUDED.msgs -> {slot} -> '{key}')"
            f" WHERE {self._free(f'(b.msgs -> {slot})')}"
            " RETURNING 1"
        )

    def _doc(self, doc: str, seq: str) -> str:
        """The stored JSON of a message: doc, with its seq set where the encoding holds it."""
        return f"jsonb_set({doc}, '{{seq}}', to_jsonb({seq}))" if self._seq_inside else doc

    def _free(self, slot: str) -> str:
        """Condition: the slot (an SQL expression) holds no message and is not purged."""
        key, purged = self._codec.key("msg"), self._codec.key("purged")
        return (
            f"COALESCE(jsonb_typeof({slot} -> '{key}'), 'null') = 'null'"
            f" AND COALESCE({slot} -> '{purged}', CAST('false' AS jsonb))"
            " = CAST('false' AS jsonb)"
        )

    def binds(self, conversation_id: str, messages: Sequence[Message]) -> dict[str, Any] | None:
        """The values of ``insert_sql`` for messages, in the order given (seqs ignored).

        None when their JSON is larger than ``FRESH_BYTES`` or than one statement holds
        (then the store's own insert writes them, split to the server's limits).
        """
        check_keys(conversation_id)
        message_doc = self._codec.message_doc
        docs = json_text([message_doc(m) for m in messages])
        most = min(FRESH_BYTES, self.db.limits().max_bytes - STATEMENT_OVERHEAD)
        if value_bytes(docs) > most:
            return None
        return {
            "bucket_conversation_id": conversation_id,
            "bucket_docs": docs,
            "bucket_empty": self._empty_slot,
            "bucket_whole": self._empty_whole,
        }

    def rows_written(self, first: int, count: int) -> int:
        """How many rows ``insert_sql`` returns when it stores seqs first … first+count-1."""
        layout = self.layout
        return layout.doc_index(first + count - 1) - layout.doc_index(first) + 1


class FreshBucketSends:
    """sql-bucket's store as ``adapters.sql.send.FreshRows`` (a base of ``SqlBucketStore``)."""

    _fresh: FreshBuckets

    def fresh_insert(self, base: str, single: bool = False) -> str:
        """See ``FreshBuckets.insert_sql`` (``adapters.sql.send`` composes it)."""
        return self._fresh.insert_sql(base, single)

    def fresh_binds(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> dict[str, Any] | None:
        """See ``FreshBuckets.binds``."""
        return self._fresh.binds(conversation_id, messages)

    def fresh_rows(self, first: int, count: int) -> int:
        """See ``FreshBuckets.rows_written``."""
        return self._fresh.rows_written(first, count)
