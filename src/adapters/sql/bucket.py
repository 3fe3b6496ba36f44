"""sql-bucket: OpenIM's buckets as rows (PRIMARY KEY doc_id) with the slots in one JSON array.

Each primitive of the BucketRepository port is one statement. Writes are conditional UPDATEs
through the engine's JSON functions (``jsonb_set``, ``JSON_SET``, ``json_set``) whose WHERE
clause checks the named slots, so a slot write lands only where the slot is still free and
a concurrent writer shows up as "0 rows updated". Reads extract only the requested slots of
all the requested buckets in one SELECT. The tag writes and the side table of deleters
beyond the bucket's inline budget are ``imbucket.adapters.sql.bucket_writes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Executable,
    Text,
    bindparam,
    cast,
    column,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.selectable import TextualSelect

from imbucket.adapters.bucket import BucketMessageStore, FirstWrite
from imbucket.adapters.bucket_patches import Slots, SpilledBy, by_bucket
from imbucket.adapters.codec import CODECS, COMPACT, conversation_of
from imbucket.adapters.sql.bucket_fills import BucketFills, Shape
from imbucket.adapters.sql.bucket_json import decoded_slots, json_text, listed, loads
from imbucket.adapters.sql.bucket_send import FreshBuckets, FreshBucketSends
from imbucket.adapters.sql.bucket_writes import (
    ROW_SQL_BYTES,
    dumps,
)
from imbucket.adapters.sql.bulk_load import BucketBulkLoad
from imbucket.adapters.sql.dialects import Kind
from imbucket.adapters.sql.engine import Database
from imbucket.adapters.sql.json_sql import (
    MARIADB,
    MARIADB_VIEW,
    POSTGRES,
    POSTGRES_VIEW,
    SQLITE,
    SQLITE_VIEW,
    VIEWER_DELETED,
    JsonSql,
    Path,
    ViewSql,
)
from imbucket.adapters.sql.prepared import Prepared, PreparedTexts
from imbucket.adapters.sql.read_marks import Raised, aggregated, carried_rows, raising_read_seq
from imbucket.adapters.sql.row_pages import ROW_FORM
from imbucket.adapters.sql.schema import BucketSchema, check_key, ensure_schema
from imbucket.adapters.sql.seq import watermarks_sql
from imbucket.adapters.sql.sizing import STATEMENT_OVERHEAD, batches, value_bytes
from imbucket.adapters.sql.stats import footprint
from imbucket.adapters.sql.store import SqlStore
from imbucket.domain.budget import TagBudget
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    Message,
    Pick,
    Slot,
    StoreStats,
    Watermarks,
    viewed_deleters,
)
from imbucket.domain.tags import Decision, Guard
from imbucket.ports.bucket_repository import Viewed
from imbucket.ports.view_reads import View

_JSON: dict[Kind, JsonSql] = {"postgresql": POSTGRES, "mariadb": MARIADB, "sqlite": SQLITE}
_VIEW: dict[Kind, ViewSql] = {
    "postgresql": POSTGRES_VIEW,
    "mariadb": MARIADB_VIEW,
    "sqlite": SQLITE_VIEW,
}
# Listed seqs averaging fewer than this many per bucket are read slot by slot: the engine
# renders and the caller decodes only those slots instead of their buckets whole.
_SPARSE = 2


class SqlBucketRepository(BucketFills):
    """BucketRepository over one SQL table of JSON buckets."""

    def __init__(self, db: Database, layout: BucketLayout, schema: BucketSchema) -> None:
        ensure_schema(db, schema, layout)
        self.db = db
        self.layout = layout
        self.schema = schema
        self._codec = CODECS[layout.encoding]
        self._json = _JSON[db.kind].keyed(self._codec)
        self._table = schema.docs.name
        self._spill = schema.spill
        self._views = _Views(schema, layout, _VIEW[db.kind], self._codec.key("del_list"))
        self._texts = PreparedTexts(db.engine.dialect)
        self._fills: dict[tuple[Shape | int, str | None], str] = {}
        self._many_fills: dict[tuple[Shape, ...], str] = {}
        to_doc = self._codec.to_doc
        self._empty_texts = [json_text(to_doc(EMPTY_SLOT))] * layout.size
        self._create = Prepared(self._new_bucket(bindparam("doc_id"), None), db.engine.dialect)
        db.limits()  # asked at open, so that no write pays the round trip

    def create_bucket(self, doc_id: str, slots: Mapping[int, Slot]) -> bool:
        """Insert the whole bucket; False when doc_id exists (the primary key says so).

        A bucket too large for one statement is inserted empty and filled by UPDATEs, in
        one transaction.
        """
        check_key(conversation_of(doc_id), "conversation_id")
        whole = self.whole(slots)
        if value_bytes(whole) + STATEMENT_OVERHEAD <= self.db.limits().max_bytes:
            return self.db.write(self._create, {"doc_id": doc_id, "msgs": whole}).rowcount == 1
        empty = self.whole({})
        docs = {index: dumps(self._codec.to_doc(slot)) for index, slot in sorted(slots.items())}
        statements: list[Executable] = [self._new_bucket(doc_id, empty)]
        statements += [self._replacing(doc_id, part) for part in self._parts(docs)]
        return self._all_or_nothing(statements)

    def create_buckets(self, buckets: Mapping[str, Mapping[int, Slot]]) -> set[str]:
        """Multi-row INSERTs that skip existing doc_ids and return the created ones.

        Buckets go in as few statements as the server's limits allow; one too large for a
        statement of its own is created by ``create_bucket``.
        """
        rows: list[tuple[str, str]] = []
        sizes: list[int] = []
        created: set[str] = set()
        budget = self.db.limits().max_bytes - STATEMENT_OVERHEAD
        for doc_id, slots in buckets.items():
            check_key(conversation_of(doc_id), "conversation_id")
            whole = self.whole(slots)
            size = value_bytes(whole) + value_bytes(doc_id) + ROW_SQL_BYTES
            if size <= budget:
                rows.append((doc_id, whole))
                sizes.append(size)
            elif self.create_bucket(doc_id, slots):
                created.add(doc_id)
        docs = self.schema.docs
        for chunk in batches(rows, sizes, 2, self.db.limits()):
            values = [{"doc_id": d, "msgs": self._document(whole)} for d, whole in chunk]
            statement = self.db.insert_ignore(docs).values(values).returning(docs.c.doc_id)
            created |= {row[0] for row in self.db.execute(statement).rows}
        return created

    def read(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, dict[int, Slot]]:
        """Requested slots of existing buckets, all buckets in one SELECT."""
        found: dict[str, dict[int, Slot]] = {}
        for doc_id, values in self._select(wanted, lambda i: [self._json.slot(i)], {}):
            found[doc_id] = {
                index: self._slot(doc_id, index, value)
                for index, value in zip(wanted[doc_id], values, strict=True)
            }
        return found

    def read_viewed(
        self, wanted: Mapping[str, Sequence[int]], viewer: str
    ) -> dict[str, dict[int, Viewed]]:
        """One SELECT of each slot without ``del_list``, plus its length and the viewer.

        Whether the list holds the viewer is JSON containment in the engine: the deleter
        list never leaves it.
        """
        json_sql = self._json

        def parts(index: int) -> list[str]:
            has = f"CASE WHEN {json_sql.has(index, 'del_list', 'viewer')} THEN 1 ELSE 0 END"
            return [json_sql.without(index, "del_list"), has, json_sql.length(index, "del_list")]

        found: dict[str, dict[int, Viewed]] = {}
        for doc_id, values in self._select(wanted, parts, {"viewer": viewer}):
            triples = zip(values[0::3], values[1::3], values[2::3], strict=True)
            found[doc_id] = {}
            for index, (value, has, count) in zip(wanted[doc_id], triples, strict=True):
                slot = self._slot(doc_id, index, value)
                deleted_by = viewed_deleters(viewer, bool(has), bool(count))
                found[doc_id][index] = (replace(slot, deleted_by=deleted_by), int(count))
        return found

    def view(
        self, conversation_id: str, viewer: str, pick: Pick
    ) -> tuple[Watermarks, dict[int, Slot], SpilledBy]:
        """The viewer's watermarks and the slots of ``pick.of(marks)`` in one statement.

        Slots as ``read_viewed`` returns them (the deleter list reduced to the viewer, or
        to "someone else"; a ``spilled`` flag is left for ``BucketMessageStore.viewed_seqs``
        to settle), by seq; a missing slot is absent. The viewer's own side-table entries
        of every flagged slot come with them (by doc_id and slot index, as ``read_spilled``
        returns them), so none is asked for afterwards. Each bucket touched comes back whole
        as JSON text and is decoded once; the buckets of a ``latest`` pick are chosen in the
        engine from max_seq, among at most ``ceil(count / size) + 1`` candidates.
        """
        check_key(conversation_id, "conversation_id")
        check_key(viewer, "user_id")
        params: dict[str, Any] = {"conversation_id": conversation_id, "user_id": viewer}
        size = self.layout.size
        if pick.latest:
            statement = self._views.latest
            params.update(viewer=viewer, count=pick.latest)
            params["docs"] = dumps(list(range(-(-pick.latest // size) + 1)))
        elif pick.seqs:
            seqs = sorted(set(pick.seqs))
            docs = sorted({self.layout.doc_index(s) for s in seqs})
            params["viewer"] = viewer
            if len(seqs) < _SPARSE * len(docs):
                statement = self._views.sparse
                slots = [[self.layout.doc_index(s), self.layout.slot_index(s)] for s in seqs]
                params["slots"] = dumps(slots)
            else:
                statement = self._views.listed
                params["docs"] = dumps(docs)
        else:  # nothing to read but the watermarks
            (row,) = self.db.execute(self._views.marks, params).rows
            return Watermarks(*map(int, row)), {}, {}
        rows = self.db.execute(statement, params).rows
        marks = Watermarks(*map(int, rows[0][:3]))
        buckets: dict[int, Any] = {}
        for row in rows:
            if row[4] is not None:
                buckets.setdefault(int(row[3]), []).append(row)
        return marks, *self._viewed(conversation_id, viewer, pick.of(marks), buckets)

    def _viewed(
        self, conversation_id: str, viewer: str, seqs: Sequence[int], buckets: dict[int, Any]
    ) -> tuple[dict[int, Slot], SpilledBy]:
        """The viewer's slots of seqs from ``view``'s rows by bucket index.

        A bucket's row holds it whole, or its rows hold one listed slot each.
        """
        layout, from_doc = self.layout, self._codec.from_doc
        deleters = self._codec.key("del_list")
        decoded: dict[int, Callable[[int], Any]] = {}
        found: dict[int, Slot] = {}
        spilled: dict[str, dict[int, set[str]]] = {}
        for seq in seqs:  # visible seqs of the pick: checked already
            doc_index, index = divmod(seq - 1, layout.size)
            if doc_index not in buckets:
                continue
            if doc_index not in decoded:
                decoded[doc_index] = decoded_slots(buckets[doc_index])
            doc = decoded[doc_index](index)
            if not doc:
                continue
            deleted = doc.pop(deleters, None)
            slot = from_doc(conversation_id, seq, doc)
            if deleted:  # the viewer sees only whether it deleted, and whether anyone did
                mine = deleted == VIEWER_DELETED if isinstance(deleted, int) else viewer in deleted
                slot = replace(slot, deleted_by=viewed_deleters(viewer, mine, True))
            if slot.spilled:  # the viewer's own side-table entry came with the bucket
                doc_id = layout.doc_id_for_index(conversation_id, doc_index)
                has = str(index) in listed(buckets[doc_index][0][5])
                spilled.setdefault(doc_id, {})[index] = {viewer} if has else set()
            found[seq] = slot
        return found, spilled

    def _select(
        self,
        wanted: Mapping[str, Sequence[int]],
        parts: Callable[[int], list[str]],
        params: dict[str, Any],
    ) -> list[tuple[str, list[Any]]]:
        """One SELECT of the JSON values parts gives for each wanted slot, per doc_id."""
        if not wanted:
            return []
        query, keys = self._select_sql(wanted, parts)
        rows = self.db.fetch(self._texts.get(query), {**keys, **params})
        return [(doc_id, [v for chunk in loads(chunks) for v in chunk]) for doc_id, chunks in rows]

    def _select_sql(
        self, wanted: Mapping[str, Sequence[int]], parts: Callable[[int], list[str]]
    ) -> tuple[str, dict[str, str]]:
        """The SELECT of ``_select`` (doc_id, slots) and its doc_id parameters."""
        keys = {f"d{n}": doc_id for n, doc_id in enumerate(wanted)}
        arrays = [
            self._json.array([part for i in indexes for part in parts(i)])
            for indexes in wanted.values()
        ]
        if len(arrays) == 1:
            slots = arrays[0]
        else:
            cases = " ".join(f"WHEN :d{n} THEN {array}" for n, array in enumerate(arrays))
            slots = f"CASE doc_id {cases} END"
        names = ", ".join(f":{name}" for name in keys)
        query = f"SELECT doc_id, {slots} AS slots FROM {self._table} WHERE doc_id IN ({names})"
        return query, keys

    def read_raising(
        self, wanted: Mapping[str, Sequence[int]], conversation_id: str, user_id: str, seq: int
    ) -> tuple[dict[str, dict[int, Slot]], Raised]:
        """``read`` riding on the raise of user_id's read seq to seq: one statement.

        See ``imbucket.adapters.sql.read_marks``.
        """
        query, keys = self._select_sql(wanted, lambda i: [self._json.slot(i)])
        rows = text(query).bindparams(**keys).columns(column("doc_id"), column("slots"))
        slots = rows.subquery("slots")
        carried = aggregated(self.db, slots, json_columns=("slots",), text_columns=("doc_id",))
        statement = raising_read_seq(self.db, self.schema, conversation_id, user_id, seq, carried)
        max_seq, found = self.db.execute(statement).rows[0]
        read: dict[str, dict[int, Slot]] = {}
        for doc_id, chunks in carried_rows(found):
            values = [v for chunk in loads(chunks) for v in chunk]
            read[doc_id] = {
                index: self._slot(doc_id, index, value)
                for index, value in zip(wanted[doc_id], values, strict=True)
            }
        return read, Raised(int(max_seq), seq <= int(max_seq))

    def scan_buckets(self, after: str | None, limit: int) -> list[tuple[str, list[Slot]]]:
        """One SELECT of whole buckets by primary key order (a range scan of the key)."""
        docs = self.schema.docs.c
        query = select(docs.doc_id, docs.msgs).order_by(docs.doc_id).limit(limit)
        if after is not None:
            query = query.where(docs.doc_id > after)
        found: list[tuple[str, list[Slot]]] = []
        for doc_id, msgs in self.db.execute(query).rows:
            slots = [self._slot(doc_id, index, value) for index, value in enumerate(loads(msgs))]
            found.append((doc_id, slots))
        return found

    def bucket_bytes(self, doc_id: str) -> int | None:
        """The length of the stored JSON document in bytes."""
        query = f"SELECT {self._json.bytes_sql} FROM {self._table} WHERE doc_id = :doc_id"
        rows = self.db.execute(text(query).bindparams(doc_id=doc_id)).rows
        return int(rows[0][0]) if rows else None

    def stats(self) -> StoreStats:
        """Exact message and bucket counts, bytes from the engine's catalog."""
        messages = self.db.execute(text(self._json.message_count(self._table))).rows[0][0]
        buckets = self.db.execute(select(func.count()).select_from(self.schema.docs)).rows[0][0]
        size = footprint(self.db, self.schema.data_tables())
        return StoreStats(int(messages), int(buckets), size.data_bytes, size.index_bytes)

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.db.close()

    def whole(self, slots: Mapping[int, Slot]) -> str:
        """The JSON text of a whole bucket holding slots (every other slot empty)."""
        to_doc, empty = self._codec.to_doc, self._codec.to_doc(EMPTY_SLOT)
        docs = [to_doc(slots[i]) if i in slots else empty for i in range(self.layout.size)]
        # orjson writes what ``dumps`` does (compact, non-ASCII kept), in C.
        return json_text(docs)

    def _slot(self, doc_id: str, index: int, value: Any) -> Slot:
        """The slot stored at index of bucket doc_id, from its decoded JSON value."""
        seq = self.layout.seq_at(doc_id, index)
        return self._codec.from_doc(conversation_of(doc_id), seq, value)

    def _new_bucket(self, doc_id: Any, msgs: str | None) -> Insert:
        """INSERT of a bucket whose msgs is the JSON text msgs, unless doc_id exists.

        msgs None binds it as ``msgs`` (a statement prepared once).
        """
        return self.db.insert_ignore(self.schema.docs).values(
            doc_id=doc_id, msgs=self._document(msgs)
        )

    def _document(self, msgs: str | None) -> ColumnElement[Any]:
        """The JSON text msgs (None: the bound ``msgs``) as the value of the msgs column."""
        # Bound as text in the compact form the JSON functions write, so that a bucket's
        # stored size does not depend on which write created it.
        document: ColumnElement[Any] = (
            bindparam("msgs", type_=Text) if msgs is None else literal(msgs, Text)
        )
        if self.db.kind == "postgresql":
            document = cast(document, postgresql.JSONB)
        return document

    def _replacing(self, doc_id: str, docs: Mapping[int, str]) -> TextClause:
        """UPDATE replacing whole slots by the slot JSON docs (in a bucket just created)."""
        params = {f"s{n}": doc for n, doc in enumerate(docs.values())}
        changes: list[tuple[Path, str]] = [
            ((index,), self._json.value(f"s{n}")) for n, index in enumerate(docs)
        ]
        return self._updating(doc_id, changes, [], params)


class _Views:
    """The pull statements of one bucket table, built once per store (bound per call)."""

    def __init__(
        self, schema: BucketSchema, layout: BucketLayout, spelling: ViewSql, deleters: str
    ) -> None:
        watermarks = watermarks_sql(schema, derived=True)
        table, spill, size = schema.docs.name, schema.spill.name, layout.size
        self.marks = _columns(text(watermarks_sql(schema)), _MARK_COLUMNS)
        latest = text(spelling.statement(table, spill, watermarks, size, latest=True))
        self.latest = _columns(latest, _VIEW_COLUMNS)
        listed = text(spelling.statement(table, spill, watermarks, size, latest=False))
        self.listed = _columns(listed, _VIEW_COLUMNS)
        sparse = text(spelling.sparse(table, spill, watermarks, size, deleters))
        self.sparse = _columns(sparse, _VIEW_COLUMNS)


# What the pull statements select, in order (ViewSql.statement).
_MARK_COLUMNS = ("max_seq", "min_seq", "user_min_seq")
_VIEW_COLUMNS = (*_MARK_COLUMNS, "doc_index", "msgs", "spilled", "slot")


def _columns(statement: TextClause, names: Sequence[str]) -> TextualSelect:
    """The statement with its result columns declared, matched by position.

    SQLAlchemy then keeps the result's description with the cached compilation instead of
    rebuilding it from the cursor on every call.
    """
    return statement.columns(*(column(name) for name in names))


class SqlBucketStore(
    SqlStore[BucketSchema, dict[str, Slots]], BucketMessageStore, FreshBucketSends
):
    """The bucket state machine's MessageStore over a SqlBucketRepository."""

    repository: SqlBucketRepository

    def __init__(self, repository: SqlBucketRepository, budget: TagBudget | None = None) -> None:
        super().__init__(repository, budget)
        self._bulk = BucketBulkLoad(
            repository.db, self.layout, repository.schema.docs, self.budget, repository.whole
        )
        self._fresh = FreshBuckets(
            repository.db, self.layout, CODECS[self.layout.encoding], repository.schema.docs.name
        )

    def load_new(self, slots: Mapping[str, Mapping[int, Slot]]) -> dict[str, set[int]]:
        """Buckets with no document yet, created whole; see ports.bulk_load.BulkLoad."""
        return self._bulk.load_new(slots)

    def loads_rows(self, form: str) -> bool:
        """Whether rows of form load as they are: sql-row's, into compact buckets (RowLoad)."""
        return form == ROW_FORM and CODECS[self.layout.encoding] is COMPACT

    def load_new_rows(self, rows: Sequence[Sequence[Any]]) -> dict[str, set[int]]:
        """sql-row's rows as buckets with no document yet; see ports.bulk_load.RowLoad."""
        return self._bulk.load_new_rows(rows)

    @property
    def unit_seqs(self) -> int:
        """A bucket's seqs (ports.bulk_load.RowLoad)."""
        return self.layout.size

    def _fill_or_create(self, doc_id: str, messages: Mapping[int, Message]) -> bool:
        """The insert's first write: fill the bucket, or create it (``fill_or_create``)."""
        return self.repository.fill_or_create(doc_id, messages)

    def _first_writes(self, buckets: Mapping[str, Mapping[int, Message]]) -> dict[str, FirstWrite]:
        """Several buckets filled or created in one statement where the engine can do it.

        ``fill_or_create_many``: a bucket it left alone is read next; elsewhere, and for one
        bucket, each bucket's first write is its own.
        """
        written = self.repository.fill_or_create_many(buckets) if len(buckets) > 1 else None
        if written is None:
            return {}
        return {d: FirstWrite.WRITTEN if d in written else FirstWrite.MISSED for d in buckets}

    def _read_raising(
        self, conversation_id: str, seqs: Sequence[int], reader_id: str, seq: int
    ) -> tuple[dict[str, Slots], Raised]:
        """See ``SqlStore._read_raising``: the slots of seqs by bucket."""
        wanted = self._wanted(conversation_id, seqs)
        found, raised = self.repository.read_raising(wanted, conversation_id, reader_id, seq)
        return by_bucket(wanted, found), raised

    def _mark_found(
        self,
        found: dict[str, Slots],
        conversation_id: str,
        seqs: Sequence[int],
        decide: Decision,
        guard: Guard | None,
    ) -> int:
        """See ``SqlStore._mark_found``: every bucket's changes written together."""
        return self._patch_read(found, conversation_id, seqs, decide, guard)

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """The pull's reads in one statement; see ViewReads.view.

        A slot flagged ``spilled`` is settled from the viewer's side-table entry that the
        statement joins in (``BucketMessageStore.viewed_seqs``): no second round trip.
        """
        marks, found, spilled = self.repository.view(conversation_id, viewer_id, pick)
        seqs = pick.of(marks)
        return marks, self.viewed_seqs(conversation_id, seqs, found, viewer_id, spilled)
