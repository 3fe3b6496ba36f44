"""Tables of the SQL stores, created on first use, and the layout record guarding them.

Every table name starts with a prefix per store kind (``imb_row_…``, ``imb_bucket_…``), so a
row store and a bucket store can share one schema without sharing counters. Which schema or
database is used comes from the URL (PostgreSQL ``options=-csearch_path=…``, MariaDB's
database name, SQLite's file).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Connection,
    Double,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    event,
    false,
    select,
    text,
)
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.exc import PendingRollbackError, SQLAlchemyError
from sqlalchemy.types import TypeEngine

from imbucket.adapters.sql.engine import Database, SchemaLockBusy
from imbucket.adapters.sql.faults import translate
from imbucket.domain.errors import InvalidArgument, LayoutMismatch
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import INT_FIELDS, MESSAGE_FIELDS, SHORT_TEXT_FIELDS

LAYOUT_VERSION = 1  # rows, and buckets in OpenIM's encoding
COMPACT_VERSION = 2  # buckets in the compact encoding
KEY_LENGTH = 255  # conversation and user ids that are part of a primary key
TEXT_LENGTH = 1000  # other short message fields (the id limit can be configured up to 1000)
_TABLE_OPTIONS: dict[str, Any] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    # Ids are compared byte for byte, trailing spaces included, as on the other engines.
    "mysql_collate": "utf8mb4_nopad_bin",
}


@dataclass(frozen=True)
class Schema:
    """The tables every SQL store has: the layout record and the seq counters."""

    metadata: MetaData
    layout: Table
    seqs: Table  # per conversation: max_seq, min_seq
    user_seqs: Table  # per conversation and user: min_seq, read_seq
    sends: Table  # per conversation and client_msg_id: the seq send recorded for it

    def data_tables(self) -> tuple[Table, ...]:
        """The tables holding messages and tags, whose footprint ``stats()`` reports."""
        raise NotImplementedError

    @property
    def cache_binding(self) -> Table:
        """The one-row record of which cache fronts the store (``SqlCacheBinding``)."""
        return self.metadata.tables[f"{self.layout.name.removesuffix('_layout')}_cache_binding"]

    @property
    def cache_log(self) -> Table:
        """The undelivered cache invalidations (``SqlInvalidationLog``)."""
        return self.metadata.tables[f"{self.layout.name.removesuffix('_layout')}_cache_log"]


@dataclass(frozen=True)
class RowSchema(Schema):
    """sql-row: one row per seq, plus one row per deleter and per early reader."""

    messages: Table
    deletions: Table
    readers: Table

    def data_tables(self) -> tuple[Table, ...]:
        """Messages, deletions and pending readers."""
        return (self.messages, self.deletions, self.readers)


@dataclass(frozen=True)
class BucketSchema(Schema):
    """sql-bucket: one row per bucket, its slots in one JSON array, plus spilled deleters."""

    docs: Table
    spill: Table  # deleters beyond a bucket's inline budget, one row each

    def data_tables(self) -> tuple[Table, ...]:
        """The buckets and the spilled deleters."""
        return (self.docs, self.spill)


def row_schema(prefix: str = "imb_row") -> RowSchema:
    """Tables of the row-per-message layout."""
    metadata, layout, seqs, user_seqs, sends = _common(prefix)
    revoke: list[Column[Any]] = [
        Column("revoked_by", String(TEXT_LENGTH)),  # NULL: not revoked
        Column("revoke_role", BigInteger),
        Column("revoke_nickname", String(TEXT_LENGTH)),
        Column("revoke_time", BigInteger),
    ]
    messages = Table(
        f"{prefix}_messages",
        metadata,
        _key("conversation_id"),
        Column("seq", BigInteger, nullable=False),
        # The message columns (OpenIM's MsgData); send_id is NULL while no message is stored.
        *(Column(name, String(TEXT_LENGTH)) for name in SHORT_TEXT_FIELDS),
        *(Column(name, BigInteger) for name in INT_FIELDS if name != "seq"),
        # Free text, and the options, the at-list and the offline push as JSON text.
        *(Column(name, _long_text()) for name in MESSAGE_FIELDS if name in _LONG),
        Column(message_column("is_read"), Boolean),
        *revoke,
        _flag("is_read"),
        _flag("purged"),
        PrimaryKeyConstraint("conversation_id", "seq"),
        **_TABLE_OPTIONS,
    )
    deletions = _marks(metadata, prefix, "deletions")
    readers = _marks(metadata, prefix, "readers")
    _drop_marks_of_purged_rows(metadata, messages, (deletions, readers))
    return RowSchema(
        metadata, layout, seqs, user_seqs, sends, messages, deletions=deletions, readers=readers
    )


def _drop_marks_of_purged_rows(
    metadata: MetaData, messages: Table, marks: tuple[Table, ...]
) -> None:
    """Triggers deleting a row's deleters and early readers once it is purged (SQLite, MariaDB).

    So that sql-row's purge is one statement (an upsert of the purged rows): the marks go
    with it, inside the engine. PostgreSQL deletes them in the same statement instead (a
    data-modifying CTE, ``SqlRowRepository``), without a trigger function. Created at
    every open when missing: MariaDB's DDL is not transactional, so an open cut between
    the table and its triggers is completed by the next one.
    """
    name = messages.name
    drops = " ".join(
        f"DELETE FROM {table.name} WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq;"
        for table in marks
    )
    became_purged = (("INSERT", "NEW.purged"), ("UPDATE", "NEW.purged AND NOT OLD.purged"))
    triggers: dict[str, list[tuple[str, str]]] = {"sqlite": [], "mysql": []}
    for event_name, became in became_purged:
        trigger = f"{name}_purge_{event_name.lower()}"
        head = f"CREATE TRIGGER IF NOT EXISTS {trigger} AFTER {event_name} ON {name} FOR EACH ROW"
        triggers["sqlite"].append((trigger, f"{head} WHEN {became} BEGIN {drops} END"))
        triggers["mysql"].append((trigger, f"{head} BEGIN IF {became} THEN {drops} END IF; END"))
    triggers["mariadb"] = triggers["mysql"]

    def create(target: MetaData, connection: Connection, **_: Any) -> None:
        for trigger, statement in triggers.get(connection.dialect.name, []):
            _create_trigger(connection, trigger, statement)

    event.listen(metadata, "after_create", create)


# The bucket table's column carrying side-table entries to the trigger (SQLite, MariaDB).
SPILLING = "spilling"


def bucket_schema(prefix: str = "imb_bucket") -> BucketSchema:
    """Tables of the JSON bucket layout."""
    metadata, layout, seqs, user_seqs, sends = _common(prefix)
    docs = Table(
        f"{prefix}_docs",
        metadata,
        _doc_id(primary_key=True),
        Column("msgs", _json(), nullable=False),
        # NULL at rest; see _spill_with_the_patch. PostgreSQL never writes it.
        Column(SPILLING, _long_text(), nullable=True),
        **_TABLE_OPTIONS,
        # Pages compressed on disk and held whole in the buffer pool: a read cuts its slots out
        # of a bucket as stored, where ROW_FORMAT=COMPRESSED inflated the bucket on every read.
        mysql_row_format="DYNAMIC",
        mysql_page_compressed="1",
    )
    spill = Table(
        f"{prefix}_spill",
        metadata,
        _doc_id(),
        Column("slot", Integer, nullable=False),
        _key("user_id"),
        PrimaryKeyConstraint("doc_id", "slot", "user_id"),
        **_TABLE_OPTIONS,
    )
    _spill_with_the_patch(metadata, docs, spill)
    _spill_by_user(metadata, spill)
    _compressed_with_lz4(metadata, docs)
    return BucketSchema(metadata, layout, seqs, user_seqs, sends, docs, spill)


def _spill_with_the_patch(metadata: MetaData, docs: Table, spill: Table) -> None:
    """A trigger that adds side-table entries with a bucket's patch (SQLite, MariaDB).

    So that a deleter spilling from a slot its patch flags is one statement: the UPDATE of
    the bucket sets ``spilling`` to the entries as JSON (``[[slot, user_id], …]``), and the
    trigger, run only for the rows the UPDATE writes, inserts them into the side table
    (skipping those there already) and clears the column, which holds NULL at rest.
    MariaDB: a BEFORE UPDATE trigger, which clears it in the row being written; SQLite
    (whose BEFORE triggers cannot change the row): an AFTER UPDATE OF trigger, which clears
    it by an UPDATE of its own. PostgreSQL needs neither: a data-modifying CTE
    (``SqlBucketRepository.patch_many``). The trigger is created at every open when
    missing, as ``_drop_marks_of_purged_rows``'s are.
    """
    name, entries = docs.name, f"NEW.{SPILLING}"
    insert = f"INSERT {{}} INTO {spill.name} (doc_id, slot, user_id) SELECT NEW.doc_id, {{}}"
    triggers = {
        "sqlite": (
            f"CREATE TRIGGER IF NOT EXISTS {name}_spilling AFTER UPDATE OF {SPILLING} ON {name}"
            f" FOR EACH ROW WHEN {entries} IS NOT NULL BEGIN "
            + insert.format(
                "OR IGNORE",
                "json_extract(value, '$[0]'), json_extract(value, '$[1]')"
                f" FROM json_each({entries});",
            )
            + f" UPDATE {name} SET {SPILLING} = NULL WHERE doc_id = NEW.doc_id; END"
        ),
        "mariadb": (
            f"CREATE TRIGGER IF NOT EXISTS {name}_spilling BEFORE UPDATE ON {name}"
            f" FOR EACH ROW BEGIN IF {entries} IS NOT NULL THEN "
            + insert.format(
                "IGNORE",
                f"j.slot, j.user_id FROM JSON_TABLE({entries}, '$[*]' COLUMNS"
                f" (slot INT PATH '$[0]', user_id VARCHAR({KEY_LENGTH}) PATH '$[1]')) AS j;",
            )
            + f" SET {entries} = NULL; END IF; END"
        ),
    }
    triggers["mysql"] = triggers["mariadb"]

    def create(target: MetaData, connection: Connection, **_: Any) -> None:
        statement = triggers.get(connection.dialect.name)
        if statement is not None:
            _create_trigger(connection, f"{name}_spilling", statement)

    event.listen(metadata, "after_create", create)


def _spill_by_user(metadata: MetaData, spill: Table) -> None:
    """An index of the side table by (doc_id, user_id), created at every open if missing.

    A pull asks for one viewer's entries of a whole bucket (``ViewSql.statement``): a probe
    of this index, whatever the number of other users' entries the bucket holds.
    """
    statement = f"CREATE INDEX IF NOT EXISTS {spill.name}_user ON {spill.name} (doc_id, user_id)"

    def create(target: MetaData, connection: Connection, **_: Any) -> None:
        connection.execute(text(statement))

    event.listen(metadata, "after_create", create)


def _compressed_with_lz4(metadata: MetaData, docs: Table) -> None:
    """PostgreSQL: the buckets' TOAST compression set to lz4 where the server has it.

    A pull decompresses every bucket it touches, a slot read once per slot; lz4 does that
    several times faster than the default pglz, for a few percent more bytes. Set at every
    open when missing (a catalog change: stored buckets are recompressed as they are
    rewritten, and read either way); a server without lz4 keeps pglz.
    """
    has_lz4 = (
        "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
        " AND 'lz4' = ANY(enumvals)"
    )
    is_set = (
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(:table)"
        " AND attname = 'msgs' AND attcompression = 'l'"
    )
    statement = f"ALTER TABLE {docs.name} ALTER COLUMN msgs SET COMPRESSION lz4"

    def create(target: MetaData, connection: Connection, **_: Any) -> None:
        if connection.dialect.name != "postgresql":
            return
        if connection.execute(text(has_lz4)).first() is None:
            return
        if connection.execute(text(is_set), {"table": docs.name}).first() is None:
            connection.execute(text(statement))

    event.listen(metadata, "after_create", create)


def _create_trigger(connection: Connection, name: str, statement: str) -> None:
    """Run statement (CREATE TRIGGER IF NOT EXISTS name …) unless the trigger exists.

    On MariaDB, CREATE TRIGGER is DDL even when the trigger exists: Galera runs it on every
    node in isolation, and stores opened at once on several nodes stall behind each other's.
    Asking first keeps the open of an existing store free of DDL.
    """
    if connection.dialect.name in ("mysql", "mariadb"):
        exists = text(
            "SELECT 1 FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = :name"
        )
        if connection.execute(exists, {"name": name}).first() is not None:
            return
    connection.execute(text(statement))


# The schema lock serialises opens on one server, but a Galera node's GET_LOCK is its own:
# stores opened at once on two nodes race through the DDL. The loser sees a table or column
# the other created after it looked (1050, 1060), a table busy with the other's replicated
# DDL (1684), a certification failure on the layout record (1213) or its connection dropped
# by the node; and each replicated DDL waits for its turn on every node, so a store can wait
# out the schema lock. Another attempt finds what the winner created. Every step is
# idempotent, so running it again is safe.
_SCHEMA_RACE_MYSQL_CODES = frozenset({1050, 1060, 1213, 1684})
SCHEMA_ATTEMPTS = 8
_SCHEMA_WAIT = 0.05  # seconds, times the attempt number, randomised


def ensure_schema(db: Database, schema: Schema, layout: BucketLayout) -> None:
    """Create missing tables and check the recorded layout; LayoutMismatch if it differs.

    Stores opened at once on several nodes of one cluster each get SCHEMA_ATTEMPTS tries.
    """
    record, version = schema.layout, _version(schema, layout)
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            with db.schema_lock() as connection:
                schema.metadata.create_all(connection)
                connection.execute(
                    db.insert_ignore(record).values(id=1, bucket_size=layout.size, version=version)
                )
                stored = connection.execute(select(record.c.bucket_size, record.c.version)).one()
            break
        except (SQLAlchemyError, SchemaLockBusy) as error:
            if attempt == SCHEMA_ATTEMPTS or not _lost_schema_race(error):
                if isinstance(error, SchemaLockBusy):
                    raise
                raise translate(error) from error
            time.sleep(random.uniform(0, _SCHEMA_WAIT * attempt))
    if stored.version != version:
        raise LayoutMismatch(_version_mismatch(record.name, stored.version, version))
    if stored.bucket_size != layout.size:
        raise LayoutMismatch(
            f"{record.name} was created with bucket size {stored.bucket_size}, "
            f"not {layout.size}: open it with store.bucket_size = {stored.bucket_size}"
        )


def _lost_schema_race(error: Exception) -> bool:
    if isinstance(error, (SchemaLockBusy, PendingRollbackError)):
        return True
    original = getattr(error, "orig", None)
    return bool(original and original.args and original.args[0] in _SCHEMA_RACE_MYSQL_CODES)


def _version(schema: Schema, layout: BucketLayout) -> int:
    """The layout version a store records: which bucket encoding it writes."""
    if isinstance(schema, BucketSchema) and layout.encoding == "compact":
        return COMPACT_VERSION
    return LAYOUT_VERSION


def _version_mismatch(table: str, stored: int, wanted: int) -> str:
    encodings = {LAYOUT_VERSION: "openim", COMPACT_VERSION: "compact"}
    if stored in encodings and wanted in encodings:
        return (
            f"{table} holds buckets in the {encodings[stored]} encoding, not "
            f'{encodings[wanted]}: open it with store.bucket_encoding = "{encodings[stored]}"'
        )
    return f"{table} holds layout version {stored}, this build uses {wanted}"


def drop_schema(db: Database, schema: Schema) -> None:
    """Drop every table of the schema (used by tools and tests, never by the stores)."""
    try:
        with db.schema_lock() as connection:
            schema.metadata.drop_all(connection)
    except SQLAlchemyError as error:
        raise translate(error) from error


def check_key(value: str, what: str) -> str:
    """Return value if it fits a key column, else InvalidArgument (nothing is written)."""
    if len(value) > KEY_LENGTH:
        raise InvalidArgument(f"{what} is longer than the {KEY_LENGTH} characters SQL keys hold")
    return value


def check_keys(conversation_id: str, user_id: str | None = None) -> None:
    """check_key for a conversation id and, when given, a user id."""
    check_key(conversation_id, "conversation_id")
    if user_id is not None:
        check_key(user_id, "user_id")


# The message columns of none of the kinds above: the free texts and the JSON ones.
_LONG = frozenset(MESSAGE_FIELDS) - {*SHORT_TEXT_FIELDS, *INT_FIELDS, "is_read"}


def message_column(name: str) -> str:
    """The sql-row column of message field name (``msg_is_read`` for the message's is_read).

    Its own name for every other field: the message-level ``is_read`` is kept apart from
    the slot's ``is_read`` flag.
    """
    return "msg_is_read" if name == "is_read" else name


def _common(prefix: str) -> tuple[MetaData, Table, Table, Table, Table]:
    metadata = MetaData()
    layout = Table(
        f"{prefix}_layout",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("bucket_size", Integer, nullable=False),
        Column("version", Integer, nullable=False),
        **_TABLE_OPTIONS,
    )
    # The cache a store is bound to (a row of its own: the binding moves, the layout never).
    Table(
        f"{prefix}_cache_binding",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("binding", String(64), nullable=False),
        **_TABLE_OPTIONS,
    )
    # Cache invalidations a writer could not deliver (ports.invalidation_log).
    Table(
        f"{prefix}_cache_log",
        metadata,
        Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True),
        _key("conversation_id"),
        Column("body", Text, nullable=False),
        Column("written_at", Double, nullable=False),
        **_TABLE_OPTIONS,
    )
    seqs = Table(
        f"{prefix}_seqs",
        metadata,
        _key("conversation_id", primary_key=True),
        _counter("max_seq"),
        _counter("min_seq"),
        **_TABLE_OPTIONS,
    )
    user_seqs = Table(
        f"{prefix}_user_seqs",
        metadata,
        _key("conversation_id"),
        _key("user_id"),
        _counter("min_seq"),
        _counter("read_seq"),
        PrimaryKeyConstraint("conversation_id", "user_id"),
        **_TABLE_OPTIONS,
    )
    sends = Table(
        f"{prefix}_sends",
        metadata,
        _key("conversation_id"),
        _key("client_msg_id"),
        Column("seq", BigInteger, nullable=False),
        # Epoch ms of the claim; claims older than the retention window are pruned by it.
        Column("claimed_at", BigInteger, nullable=False, server_default="0"),
        PrimaryKeyConstraint("conversation_id", "client_msg_id"),
        Index(f"{prefix}_sends_claimed_at", "claimed_at"),
        **_TABLE_OPTIONS,
    )
    _raise_max_seq_with_claims(metadata, seqs, sends)
    return metadata, layout, seqs, user_seqs, sends


def _raise_max_seq_with_claims(metadata: MetaData, seqs: Table, sends: Table) -> None:
    """A SQLite trigger raising max_seq to the seq of each claim inserted with one.

    So that a fresh send claims and allocates in one statement (``adapters.sql.send``): the
    claims carry their seqs, the counter follows inside the engine. A claim inserted with
    no seq yet (``allocate_sends``) moves nothing. Created with IF NOT EXISTS at every open.
    """
    name = f"{sends.name}_raise_max_seq"
    statement = (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER INSERT ON {sends.name} FOR EACH ROW"
        f" WHEN NEW.seq > 0 BEGIN INSERT INTO {seqs.name} (conversation_id, max_seq, min_seq)"
        " VALUES (NEW.conversation_id, NEW.seq, 0) ON CONFLICT (conversation_id)"
        " DO UPDATE SET max_seq = max(max_seq, excluded.max_seq); END"
    )

    def create(target: MetaData, connection: Connection, **_: Any) -> None:
        if connection.dialect.name == "sqlite":
            _create_trigger(connection, name, statement)

    event.listen(metadata, "after_create", create)


def _marks(metadata: MetaData, prefix: str, name: str) -> Table:
    """A set of users per seq (deleters, early readers): the primary key is the whole row."""
    return Table(
        f"{prefix}_{name}",
        metadata,
        _key("conversation_id"),
        Column("seq", BigInteger, nullable=False),
        _key("user_id"),
        PrimaryKeyConstraint("conversation_id", "seq", "user_id"),
        **_TABLE_OPTIONS,
    )


def _doc_id(**options: Any) -> Column[str]:
    # A conversation id, a colon and a bucket index of up to 20 digits.
    return Column("doc_id", String(KEY_LENGTH + 21), nullable=False, **options)


def _key(name: str, **options: Any) -> Column[str]:
    return Column(name, String(KEY_LENGTH), nullable=False, **options)


def _counter(name: str) -> Column[int]:
    return Column(name, BigInteger, nullable=False, default=0, server_default=text("0"))


def _flag(name: str) -> Column[bool]:
    return Column(name, Boolean, nullable=False, default=False, server_default=false())


def _long_text() -> TypeEngine[str]:
    # MariaDB's TEXT stops at 64 KiB; content may be configured larger.
    return Text().with_variant(mysql.LONGTEXT(), "mysql")


def _json() -> TypeEngine[Any]:
    return JSON().with_variant(postgresql.JSONB(), "postgresql")
