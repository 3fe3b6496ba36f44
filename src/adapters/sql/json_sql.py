"""The JSON functions of each engine, as SQL fragments over a bucket's ``msgs`` array.

Slot indexes and field names come from imbucket itself (ints from the layout, fixed names),
so they are written into the SQL; every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from imbucket.adapters.codec import SlotCodec

Path = tuple[int] | tuple[int, str]  # a whole slot, or one field of it

# Engines cap function arguments (PostgreSQL at 100, SQLite at 127): long lists are nested.
CHUNK = 50
# From this many changes on, an engine that can rebuilds the array in one pass instead of
# nesting one copy of the whole document per change.
REBUILD_FROM = 8


@dataclass(frozen=True, slots=True)
class JsonSql:
    """One engine's spelling of the few JSON operations the bucket table needs.

    Templates take ``{index}``, ``{name}``, ``{field}`` (the field's JSON) and ``{param}``
    (a bind parameter name) where they apply. Methods take the slot field names of
    ``imbucket.adapters.codec`` (``msg``, ``del_list``, …) and write the stored keys of the bucket
    encoding (``keyed``): a missing key reads as the field's empty value (null, false, []),
    so a compact slot stores only what differs from an empty one.
    """

    slot_sql: str
    field_sql: str
    null_sql: str  # condition: the field is JSON null
    false_sql: str  # condition: the field is JSON false
    value_sql: str  # JSON text in a bind parameter, as JSON
    has_sql: str  # condition: the array field contains the string parameter
    appended_sql: str  # the array field with the string parameter appended
    empty_array_sql: str
    true_sql: str
    false_value_sql: str
    length_sql: str  # the length of array field ``{name}`` of slot ``{index}``
    without_sql: str  # slot ``{index}`` without its field ``{name}``
    deleters_sql: str  # how many deleters the bucket's slots hold in all
    bytes_sql: str  # the stored size of ``msgs`` in bytes
    slot_path_sql: str  # a path literal to slot ``{index}``
    field_path_sql: str  # a path literal to field ``{name}`` of slot ``{index}``
    set_function: str  # f(doc, path, value[, path, value…])
    pairs_per_set: int
    array_function: str
    count_sql: str  # counts the stored messages of ``{table}``
    # One pass over the array: ``{cases}`` are ``WHEN <index> THEN <new slot>`` over ``s.slot``.
    rebuild_sql: str | None = None
    element_field_sql: str = ""  # ``{slot}`` with field ``{name}`` set to ``{value}``
    # A field at the path text bound to ``{param}`` (``field_path_text``), so that one
    # statement serves every slot; None where paths are literals only.
    bound_field_sql: str | None = None
    field_path_text: str = ""  # the path to field ``{name}`` of slot ``{index}``, as text
    keys: Mapping[str, str] = field(default_factory=dict)  # slot field -> stored key
    message_marker: str = "msg.seq"  # a path found once per stored message
    message_type: str = "object"  # the JSON type of a stored message
    # One statement that fills bucket ``:doc_id`` of ``{table}`` (``msgs`` becomes
    # ``{document}`` where ``{where}`` holds) or, when it does not exist, inserts it as
    # ``:whole``; it returns a row for each row written. None where the engine cannot tell
    # an existing row left as it was from a new one (MariaDB's upsert).
    fill_or_create_sql: str | None = None
    # ``fill_or_create_sql`` of several buckets: rows ``{rows}`` of (doc_id, whole bucket)
    # inserted, an existing one's ``msgs`` becoming ``{document}`` (by doc_id) where
    # ``{where}`` holds; it returns the doc_id of each row written.
    fill_or_create_many_sql: str | None = None

    def keyed(self, codec: SlotCodec) -> JsonSql:
        """The engine's JSON SQL for buckets written by codec."""
        return replace(
            self,
            keys=dict(codec.keys),
            message_marker=codec.message_marker,
            message_type=codec.message_type,
        )

    def key(self, name: str) -> str:
        """The stored key of slot field name."""
        return self.keys.get(name, name)

    def slot(self, index: int) -> str:
        """The JSON of one slot."""
        return self.slot_sql.format(index=index)

    def field(self, index: int, name: str) -> str:
        """The JSON of one field of a slot."""
        return self.field_sql.format(index=index, name=self.key(name))

    def is_null(self, index: int, name: str) -> str:
        """Condition: the field holds JSON null."""
        return self.null_sql.format(field=self.field(index, name))

    def is_false(self, index: int, name: str) -> str:
        """Condition: the field holds JSON false."""
        return self.false_sql.format(field=self.field(index, name))

    def path_text(self, index: int, name: str) -> str:
        """The path to a field of slot index, as the text a bound path holds."""
        return self.field_path_text.format(index=index, name=self.key(name))

    def is_null_at(self, param: str) -> str:
        """Condition: the field at the path bound to param holds JSON null."""
        assert self.bound_field_sql is not None
        return self.null_sql.format(field=self.bound_field_sql.format(param=param))

    def is_false_at(self, param: str) -> str:
        """Condition: the field at the path bound to param holds JSON false."""
        assert self.bound_field_sql is not None
        return self.false_sql.format(field=self.bound_field_sql.format(param=param))

    def value(self, param: str) -> str:
        """The JSON text bound to param, as a JSON value."""
        return self.value_sql.format(param=param)

    def added(self, index: int, name: str, param: str, unless: str) -> str:
        """The array field with the string param added, kept as it is if present or unless."""
        # A missing array field is an empty one (PostgreSQL's jsonb_set drops a NULL value).
        field = f"COALESCE({self.field(index, name)}, {self.empty_array_sql})"
        has = self.has(index, name, param)
        appended = self.appended_sql.format(field=field, param=param)
        return f"(CASE WHEN {unless} OR {has} THEN {field} ELSE {appended} END)"

    def true_unless(self, index: int, name: str, unless: str) -> str:
        """JSON true, or the field's current value when the condition holds."""
        current = f"COALESCE({self.field(index, name)}, {self.false_value_sql})"
        return f"(CASE WHEN {unless} THEN {current} ELSE {self.true_sql} END)"

    def flag_unless(self, unless: str) -> str:
        """JSON true, or false when the condition holds (for a field that may be missing)."""
        return f"(CASE WHEN {unless} THEN {self.false_value_sql} ELSE {self.true_sql} END)"

    def length(self, index: int, name: str) -> str:
        """The number of entries of an array field of a slot (0 when it is missing)."""
        return f"COALESCE({self.length_sql.format(index=index, name=self.key(name))}, 0)"

    def has(self, index: int, name: str, param: str) -> str:
        """Condition: the array field of a slot contains the string bound to param."""
        return self.has_sql.format(
            field=self.field(index, name), param=param, index=index, name=self.key(name)
        )

    def without(self, index: int, name: str) -> str:
        """The JSON of one slot minus one of its fields."""
        return self.without_sql.format(index=index, name=self.key(name))

    def set(self, changes: Sequence[tuple[Path, str]]) -> str:
        """``msgs`` with each path replaced by its value expression."""
        if self.rebuild_sql is not None and len(changes) >= REBUILD_FROM:
            return self._rebuilt(changes)
        return self._set([f"{self._path(path)}, {value}" for path, value in changes])

    def set_at(self, changes: Sequence[tuple[str, str]]) -> str:
        """``msgs`` with the path bound to each param replaced by its value expression."""
        return self._set([f":{param}, {value}" for param, value in changes])

    def _set(self, pairs: Sequence[str]) -> str:
        """The set function over msgs, pairs_per_set "path, value" pairs a call."""
        document = "msgs"
        step = self.pairs_per_set
        for start in range(0, len(pairs), step):
            document = f"{self.set_function}({document}, {', '.join(pairs[start : start + step])})"
        return document

    def array(self, items: Sequence[str]) -> str:
        """A JSON array of arrays of at most CHUNK items each (the reader flattens it)."""
        function = self.array_function
        chunks = (items[start : start + CHUNK] for start in range(0, len(items), CHUNK))
        return f"{function}(" + ", ".join(f"{function}({', '.join(c)})" for c in chunks) + ")"

    def message_count(self, table: str) -> str:
        """A query counting the slots of every bucket that hold a message."""
        return self.count_sql.format(
            table=table,
            msg=self.key("msg"),
            marker=self.message_marker,
            type=self.message_type,
        )

    @property
    def deleters(self) -> str:
        """How many deleters the bucket's slots hold in all."""
        return self.deleters_sql.format(del_list=self.key("del_list"))

    def _rebuilt(self, changes: Sequence[tuple[Path, str]]) -> str:
        assert self.rebuild_sql is not None
        slots: dict[int, str] = {}
        for path, value in changes:
            if len(path) == 1:
                slots[path[0]] = value
            else:
                current = slots.get(path[0], "s.slot")
                slots[path[0]] = self.element_field_sql.format(
                    slot=current, name=self.key(path[1]), value=value
                )
        cases = " ".join(f"WHEN {index} THEN {slot}" for index, slot in sorted(slots.items()))
        return self.rebuild_sql.format(cases=cases)

    def _path(self, path: Path) -> str:
        if len(path) == 1:
            return self.slot_path_sql.format(index=path[0])
        return self.field_path_sql.format(index=path[0], name=self.key(path[1]))


POSTGRES = JsonSql(
    slot_sql="(msgs -> {index})",
    field_sql="(msgs -> {index} -> '{name}')",
    null_sql="COALESCE(jsonb_typeof({field}), 'null') = 'null'",
    false_sql="COALESCE({field}, CAST('false' AS jsonb)) = CAST('false' AS jsonb)",
    value_sql="CAST(:{param} AS jsonb)",
    has_sql="{field} @> jsonb_build_array(CAST(:{param} AS text))",
    appended_sql="({field} || jsonb_build_array(CAST(:{param} AS text)))",
    empty_array_sql="CAST('[]' AS jsonb)",
    true_sql="CAST('true' AS jsonb)",
    false_value_sql="CAST('false' AS jsonb)",
    length_sql="jsonb_array_length(msgs -> {index} -> '{name}')",
    without_sql="((msgs -> {index}) - '{name}')",
    deleters_sql=(
        "(SELECT COALESCE(SUM(jsonb_array_length(s -> '{del_list}')), 0)"
        " FROM jsonb_array_elements(msgs) AS s)"
    ),
    bytes_sql="octet_length(CAST(msgs AS text))",
    slot_path_sql="'{{{index}}}'",
    field_path_sql="'{{{index},{name}}}'",
    set_function="jsonb_set",
    pairs_per_set=1,
    array_function="jsonb_build_array",
    count_sql=(
        "SELECT COUNT(*) FROM {table}, jsonb_array_elements({table}.msgs) AS slot"
        " WHERE jsonb_typeof(slot -> '{msg}') = '{type}'"
    ),
    rebuild_sql=(
        "(SELECT jsonb_agg(CASE s.n - 1 {cases} ELSE s.slot END ORDER BY s.n)"
        " FROM jsonb_array_elements(msgs) WITH ORDINALITY AS s(slot, n))"
    ),
    element_field_sql="jsonb_set({slot}, '{{{name}}}', {value})",
    # Both parts see one snapshot: the UPDATE finds the bucket or the INSERT creates it (a
    # bucket another writer creates meanwhile makes the INSERT do nothing: 0, read again).
    fill_or_create_sql=(
        "WITH filled AS (UPDATE {table} SET msgs = {document} WHERE {where} RETURNING 1),"
        " created AS (INSERT INTO {table} (doc_id, msgs) SELECT :doc_id, CAST(:whole AS jsonb)"
        " WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE doc_id = :doc_id)"
        " ON CONFLICT (doc_id) DO NOTHING RETURNING 1)"
        " SELECT 1 FROM filled UNION ALL SELECT 1 FROM created"
    ),
)

# MariaDB and SQLite share the ``$[i].name`` path syntax and take many pairs per JSON_SET.
_DOLLAR_PATHS: dict[str, Any] = {
    "slot_path_sql": "'$[{index}]'",
    "field_path_sql": "'$[{index}].{name}'",
    "field_path_text": "$[{index}].{name}",
    "pairs_per_set": CHUNK,
}

MARIADB = JsonSql(
    slot_sql="JSON_EXTRACT(msgs, '$[{index}]')",
    field_sql="JSON_EXTRACT(msgs, '$[{index}].{name}')",
    bound_field_sql="JSON_EXTRACT(msgs, :{param})",
    null_sql="COALESCE(JSON_TYPE({field}), 'NULL') = 'NULL'",
    false_sql="COALESCE({field}, 'false') = 'false'",
    value_sql="JSON_EXTRACT(:{param}, '$')",
    has_sql="JSON_CONTAINS({field}, JSON_QUOTE(:{param}))",
    appended_sql="JSON_ARRAY_APPEND({field}, '$', :{param})",
    empty_array_sql="JSON_ARRAY()",
    true_sql="JSON_EXTRACT('true', '$')",
    false_value_sql="JSON_EXTRACT('false', '$')",
    length_sql="JSON_LENGTH(msgs, '$[{index}].{name}')",
    without_sql="JSON_REMOVE(JSON_EXTRACT(msgs, '$[{index}]'), '$.{name}')",
    # Every deleter of every slot, gathered into one array by the wildcard path.
    deleters_sql="COALESCE(JSON_LENGTH(JSON_EXTRACT(msgs, '$[*].{del_list}[*]')), 0)",
    bytes_sql="LENGTH(msgs)",
    **_DOLLAR_PATHS,
    set_function="JSON_SET",
    array_function="JSON_ARRAY",
    # The marker path ('$[*].msg.seq') matches once per stored message (a null msg has none).
    count_sql=(
        "SELECT COALESCE(SUM(JSON_LENGTH(JSON_EXTRACT(msgs, '$[*].{marker}'))), 0) FROM {table}"
    ),
)

SQLITE = JsonSql(
    slot_sql="(msgs -> '$[{index}]')",
    field_sql="(msgs -> '$[{index}].{name}')",
    bound_field_sql="(msgs -> :{param})",
    null_sql="COALESCE(json_type({field}), 'null') = 'null'",
    false_sql="COALESCE(json_type({field}), 'false') = 'false'",
    value_sql="json(:{param})",
    has_sql=(
        "EXISTS (SELECT 1 FROM json_each(msgs, '$[{index}].{name}') AS e WHERE e.value = :{param})"
    ),
    appended_sql="json_insert({field}, '$[#]', :{param})",
    empty_array_sql="json('[]')",
    true_sql="json('true')",
    false_value_sql="json('false')",
    length_sql="json_array_length(msgs, '$[{index}].{name}')",
    without_sql="json_remove(msgs -> '$[{index}]', '$.{name}')",
    deleters_sql=(
        "(SELECT COUNT(*) FROM json_each(msgs) AS s, json_each(s.value, '$.{del_list}') AS d)"
    ),
    bytes_sql="length(CAST(msgs AS BLOB))",
    **_DOLLAR_PATHS,
    set_function="json_set",
    array_function="json_array",
    count_sql=(
        "SELECT COUNT(*) FROM {table}, json_each({table}.msgs) AS slot"
        " WHERE json_type(slot.value, '$.{msg}') = '{type}'"
    ),
    # In an upsert's DO UPDATE a bare column names the existing row's value.
    fill_or_create_sql=(
        "INSERT INTO {table} (doc_id, msgs) VALUES (:doc_id, :whole) ON CONFLICT (doc_id)"
        " DO UPDATE SET msgs = {document} WHERE {where} RETURNING 1"
    ),
    fill_or_create_many_sql=(
        "INSERT INTO {table} (doc_id, msgs) VALUES {rows} ON CONFLICT (doc_id)"
        " DO UPDATE SET msgs = {document} WHERE {where} RETURNING doc_id"
    ),
)


# What a pull of few slots a bucket receives in place of a slot's deleter list.
VIEWER_DELETED, OTHERS_DELETED = 1, 2


@dataclass(frozen=True, slots=True)
class ViewSql:
    """One engine's spelling of the fused pull read over the bucket table (``view``).

    The statement joins the one-row watermark query ``w`` to the candidate buckets ``c``
    (``c.j``: a bound JSON array of bucket indexes, or of offsets back from the bucket of
    max_seq) and each candidate's row ``d`` by primary key, and returns each bucket's
    ``msgs`` whole, as the JSON text the engine keeps or renders once: no per-slot JSON
    work in the engine. The caller decodes each bucket once and picks its slots. LEFT
    JOINs all the way, so that the watermarks come back even when no bucket does.
    """

    candidates_sql: str  # FROM item ``c`` with integer column ``c.j`` from JSON ``:docs``
    divide_sql: str  # integer division of ``{left}`` by ``{right}``
    doc_id_sql: str  # ``:conversation_id`` + ':' + bucket index ``{index}``
    text_sql: str  # ``d.msgs`` as JSON text
    slots_sql: str  # the ``s.slot`` values of the rows ``s`` as one comma-separated text
    greatest: str
    # A listed slot ``{slot}`` with its deleter list ``{deleters}`` reduced to what the viewer
    # may learn: VIEWER_DELETED when the viewer deleted it, OTHERS_DELETED when only others
    # did, as stored (absent or empty) when nobody did. A pull of one slot then receives the same
    # bytes whatever the number of its deleters.
    viewed_slot_sql: str
    # FROM item ``d``: the row of bucket ``{doc_id}`` of ``{table}``, found by primary key.
    bucket_sql: str = "{table} AS d ON d.doc_id = {doc_id}"
    # The sparse read, one of two ways. For an engine whose JSON functions detoast or parse a
    # bucket's whole text on every call: FROM item ``c`` with ``c.j``, ``c.k`` and ``c.slot``,
    # slot k of bucket j of ``{table}`` (found by ``{doc_id}`` of ``p.j``) extracted once per
    # listed slot, NULL when the bucket is missing, and not flattened into the outer query, so
    # that ``viewed_slot_sql`` (given ``{slot}`` = ``c.slot``) works on the slot's text alone.
    extracted_pairs_sql: str = ""
    # Else: FROM item ``c`` with ``c.j`` (bucket index) and ``c.k`` (slot index) from JSON
    # ``:slots``, joined to ``bucket_sql``, and slot ``c.k`` of ``d.msgs`` (JSON).
    pairs_sql: str = ""
    slot_at_sql: str = ""

    def statement(self, table: str, spill: str, watermarks: str, size: int, latest: bool) -> str:
        """The SELECT of (max_seq, min_seq, user_min_seq, doc_index, msgs, spilled, slot).

        latest: the buckets of the newest ``:count`` visible seqs (the candidates are
        offsets back from the bucket of max_seq); else the buckets among ``:docs`` holding
        a visible seq. ``spilled``: the slots of the bucket whose side-table entries hold
        ``:viewer`` (comma-separated, NULL for none), so that a slot flagged ``spilled``
        needs no second round trip; ``slot`` is NULL (the bucket is whole). Rows with a
        NULL doc_index carry the watermarks alone.
        """
        return self._select(table, spill, watermarks, size, latest)

    def sparse(self, table: str, spill: str, watermarks: str, size: int, deleters: str) -> str:
        """``statement`` for listed seqs few to a bucket: one row per listed slot.

        Its ``msgs`` is the slot alone with its deleter list (key ``deleters``) reduced to
        the viewer (``viewed_slot_sql``), its ``slot`` the slot index; the engine then
        renders one slot instead of the whole bucket, and the caller decodes one slot.
        """
        slot = "c.slot" if self.extracted_pairs_sql else self.slot_at_sql
        viewed = self.viewed_slot_sql.format(slot=slot, deleters=deleters)
        return self._select(table, spill, watermarks, size, latest=False, sparse=viewed)

    def _select(
        self,
        table: str,
        spill: str,
        watermarks: str,
        size: int,
        latest: bool,
        sparse: str | None = None,
    ) -> str:
        if latest:
            last = self.divide_sql.format(left="w.max_seq - 1", right=size)
            index = f"({last} - c.j)"
            low = f"{self.greatest}(w.max_seq - :count + 1, w.min_seq, w.user_min_seq, 1)"
        else:
            index = "c.j"
            low = f"{self.greatest}(w.min_seq, w.user_min_seq, 1)"
        # Only the candidates holding a visible seq: the newest seqs often fill one bucket.
        # In bucket indexes: seqs near 2**63 would overflow as seqs.
        first = self.divide_sql.format(left=f"{low} - 1", right=size)
        last_index = self.divide_sql.format(left="w.max_seq - 1", right=size)
        candidate = f"{index} >= {first} AND {index} <= {last_index}"
        doc_id = self.doc_id_sql.format(index=index)
        spilled = (
            f"(SELECT {self.slots_sql} FROM {spill} AS s"
            f" WHERE s.doc_id = {doc_id} AND s.user_id = :viewer)"
        )
        found = "d.msgs"
        sources = (
            f" LEFT JOIN {self.pairs_sql if sparse else self.candidates_sql} ON {candidate}"
            f" LEFT JOIN {self.bucket_sql.format(table=table, doc_id=doc_id)}"
        )
        if sparse and self.extracted_pairs_sql:
            found = "c.slot"
            pairs = self.extracted_pairs_sql.format(
                table=table, doc_id=self.doc_id_sql.format(index="p.j")
            )
            sources = f" LEFT JOIN {pairs} ON {candidate}"
        return (
            f"SELECT w.max_seq, w.min_seq, w.user_min_seq, {index} AS doc_index,"
            f" {sparse or self.text_sql} AS msgs,"
            f" CASE WHEN {found} IS NULL THEN NULL ELSE {spilled} END AS spilled,"
            f" {'c.k' if sparse else 'NULL'} AS slot FROM ({watermarks}) AS w{sources}"
        )


POSTGRES_VIEW = ViewSql(
    candidates_sql=(
        "(SELECT CAST(t.j AS bigint) AS j"
        " FROM jsonb_array_elements_text(CAST(:docs AS jsonb)) AS t(j)) AS c"
    ),
    divide_sql="(({left}) / {right})",
    doc_id_sql="(CAST(:conversation_id AS text) || ':' || CAST({index} AS text))",
    # jsonb rendered as text once per bucket: cheaper than walking its elements, and the
    # driver hands text over without decoding it.
    text_sql="CAST(d.msgs AS text)",
    slots_sql="string_agg(CAST(s.slot AS text), ',')",
    viewed_slot_sql=(
        "CAST(CASE WHEN jsonb_typeof({slot} -> '{deleters}') IS DISTINCT FROM 'array' THEN {slot}"
        " WHEN jsonb_array_length({slot} -> '{deleters}') = 0 THEN {slot}"
        " ELSE jsonb_set({slot}, '{{{deleters}}}', CASE WHEN ({slot} -> '{deleters}')"
        " @> jsonb_build_array(CAST(:viewer AS text)) THEN '1'::jsonb ELSE '2'::jsonb END)"
        " END AS text)"
    ),
    greatest="GREATEST",
    # A LATERAL subquery the planner cannot flatten (LIMIT): one primary-key probe per
    # candidate, whatever it guesses of the JSON array's length (it guesses 100, and a
    # hash join of 100 candidates would scan the whole table).
    bucket_sql="LATERAL (SELECT msgs FROM {table} WHERE doc_id = {doc_id} LIMIT 1) AS d ON 1 = 1",
    # The same probe, cutting the slot out inside it: the bucket is detoasted once per slot,
    # where every reference to ``d.msgs -> c.k`` would detoast it again.
    extracted_pairs_sql=(
        "(SELECT p.j, p.k, b.slot FROM (SELECT CAST(t.p ->> 0 AS bigint) AS j,"
        " CAST(t.p ->> 1 AS integer) AS k FROM jsonb_array_elements(CAST(:slots AS jsonb))"
        " AS t(p)) AS p LEFT JOIN LATERAL (SELECT msgs -> p.k AS slot FROM {table}"
        " WHERE doc_id = {doc_id} LIMIT 1) AS b ON 1 = 1) AS c"
    ),
)

MARIADB_VIEW = ViewSql(
    candidates_sql="JSON_TABLE(:docs, '$[*]' COLUMNS (j BIGINT PATH '$')) AS c",
    divide_sql="(({left}) DIV {right})",
    doc_id_sql="CONCAT(:conversation_id, ':', {index})",
    text_sql="d.msgs",
    slots_sql="GROUP_CONCAT(s.slot)",
    viewed_slot_sql=(
        "CASE WHEN COALESCE(JSON_LENGTH({slot}, '$.{deleters}'), 0) = 0"
        " THEN {slot} ELSE JSON_COMPACT(JSON_SET({slot}, '$.{deleters}', IF(JSON_CONTAINS("
        "JSON_EXTRACT({slot}, '$.{deleters}'), JSON_QUOTE(:viewer)), 1, 2))) END"
    ),
    greatest="GREATEST",
    # A derived table with a LIMIT is materialised, not merged: each listed slot is cut out
    # of its bucket's text once, where every reference to it would parse the bucket again.
    # JSON_QUERY stops at the slot (a slot is an object, or null: no slot) and returns its text
    # as stored; JSON_EXTRACT reads on to the end of the bucket, looking for more matches, and
    # re-spaces what it returns (as JSON_SET does: hence JSON_COMPACT above).
    extracted_pairs_sql=(
        "(SELECT p.j, p.k, JSON_QUERY(b.msgs, CONCAT('$[', p.k, ']')) AS slot FROM JSON_TABLE("
        ":slots, '$[*]' COLUMNS (j BIGINT PATH '$[0]', k BIGINT PATH '$[1]')) AS p"
        " LEFT JOIN {table} AS b ON b.doc_id = {doc_id} LIMIT 18446744073709551615) AS c"
    ),
)

SQLITE_VIEW = ViewSql(
    candidates_sql="(SELECT t.value AS j FROM json_each(:docs) AS t) AS c",
    divide_sql="(({left}) / {right})",
    doc_id_sql="(:conversation_id || ':' || {index})",
    text_sql="d.msgs",
    slots_sql="group_concat(s.slot)",
    pairs_sql=(
        "(SELECT t.value ->> '$[0]' AS j, t.value ->> '$[1]' AS k FROM json_each(:slots) AS t) AS c"
    ),
    slot_at_sql="(d.msgs -> ('$[' || c.k || ']'))",
    viewed_slot_sql=(
        "CASE WHEN COALESCE(json_array_length(d.msgs, '$[' || c.k || '].{deleters}'), 0) = 0"
        " THEN {slot} ELSE json_set({slot}, '$.{deleters}', CASE WHEN EXISTS (SELECT 1 FROM"
        " json_each(d.msgs, '$[' || c.k || '].{deleters}') AS e WHERE e.value = :viewer)"
        " THEN 1 ELSE 2 END) END"
    ),
    greatest="max",
)
