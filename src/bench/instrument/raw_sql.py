"""The benchmark's raw-driver arms on SQL: pull_latest(20) as one SELECT, no service.

``RawRowLatest`` reads the sql-row tables, ``RawBucketLatest`` the sql-bucket table; both are
built from the stores' own schema objects (a column added there is read here too) and return
raw rows: no validation, no separate watermark round trip, no projection into views.
Comparing their latency with the service's ``pull_latest`` on the same store shows what the
service layer costs. Not stores: they only read.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import (
    BigInteger,
    BindParameter,
    Engine,
    Integer,
    Select,
    String,
    Text,
    bindparam,
    cast,
    func,
    literal,
    select,
    type_coerce,
    union_all,
)

from imbucket.adapters.sql.schema import BucketSchema, RowSchema
from imbucket.domain.layout import BucketLayout


class RawRowLatest:
    """The newest messages of a conversation a viewer may see, in one SELECT."""

    def __init__(self, engine: Engine, schema: RowSchema) -> None:
        self.engine = engine
        self._query = latest_query(schema)

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """Rows of the newest count seqs above the viewer's floors, newest first.

        Each row holds every column of the messages table and whether the viewer deleted
        it (``deleted`` = 1).
        """
        with self.engine.connect() as connection:
            result = connection.execute(
                self._query, {"conv": conversation_id, "viewer": viewer_id, "n": count}
            )
            return list(result.fetchall())


def latest_query(schema: RowSchema) -> Select[Any]:
    """The SELECT of ``RawRowLatest``, with parameters ``conv``, ``viewer`` and ``n``."""
    m, d = schema.messages, schema.deletions
    seqs, users = schema.seqs, schema.user_seqs
    conv: BindParameter[str] = bindparam("conv")
    viewer: BindParameter[str] = bindparam("viewer")
    deleted = (
        select(func.count())
        .select_from(d)
        .where(
            d.c.conversation_id == m.c.conversation_id,
            d.c.seq == m.c.seq,
            d.c.user_id == viewer,
        )
        .scalar_subquery()
        .label("deleted")
    )
    floor = select(seqs.c.min_seq).where(seqs.c.conversation_id == conv).scalar_subquery()
    user_floor = (
        select(users.c.min_seq)
        .where(users.c.conversation_id == conv, users.c.user_id == viewer)
        .scalar_subquery()
    )
    return (
        select(*m.c, deleted)
        .where(
            m.c.conversation_id == conv,
            m.c.seq >= func.coalesce(floor, 0),
            m.c.seq >= func.coalesce(user_floor, 0),
        )
        .order_by(m.c.seq.desc())
        .limit(bindparam("n"))
    )


class RawBucketLatest:
    """The newest slots of a conversation, from its bucket rows read whole in one SELECT.

    The watermarks are subqueries of the same statement; the engine computes the one or two
    doc_ids holding the newest seqs and returns each bucket's ``msgs`` whole as JSON text
    (PostgreSQL renders its ``jsonb`` once); each is decoded once with orjson and sliced
    here, as the store does.
    """

    def __init__(self, engine: Engine, schema: BucketSchema, layout: BucketLayout) -> None:
        self.engine = engine
        self._query = bucket_latest_query(schema, layout.size, engine.dialect.name)

    def pull_latest(self, conversation_id: str, viewer_id: str, count: int) -> list[Any]:
        """Per bucket touched, oldest first: ``{doc_id, low, msgs}``, the wanted slots only.

        The slots (the store's encoding: OpenIM's ``msg``, ``revoke``, ``del_list`` … or the
        compact one's ``m``, ``r``, ``d`` …) of the newest count seqs above the viewer's
        floors, decoded from JSON, the first of them at slot index ``low``.
        """
        with self.engine.connect() as connection:
            result = connection.execute(
                self._query, {"conv": conversation_id, "viewer": viewer_id, "n": count}
            )
            return [
                {"doc_id": d, "low": int(low), "msgs": orjson.loads(msgs)[int(low) : int(high) + 1]}
                for d, msgs, low, high in result.fetchall()
            ]


def bucket_latest_query(schema: BucketSchema, size: int, dialect: str) -> Select[Any]:
    """The SELECT of ``RawBucketLatest``, with parameters ``conv``, ``viewer`` and ``n``.

    Rows: (doc_id, the bucket's JSON text, first and last wanted slot), oldest bucket first.
    """
    docs, seqs, users = schema.docs, schema.seqs, schema.user_seqs
    conv: BindParameter[str] = bindparam("conv", type_=String)
    viewer: BindParameter[str] = bindparam("viewer", type_=String)
    greatest = _greatest(dialect)
    user_floor = (
        select(users.c.min_seq)
        .where(users.c.conversation_id == conv, users.c.user_id == viewer)
        .scalar_subquery()
    )
    floor = greatest(seqs.c.min_seq, func.coalesce(user_floor, 0), 1)
    first = greatest(seqs.c.max_seq - bindparam("n", type_=Integer) + 1, floor)
    bounds = (
        select(seqs.c.max_seq.label("last"), first.label("first"))
        .where(seqs.c.conversation_id == conv)
        .cte("bounds")
    )
    last, first_seq = bounds.c.last, bounds.c.first
    newest, oldest = (last - 1) // size, (first_seq - 1) // size
    separator = BucketLayout.doc_id_for_index("", 0).removesuffix("0")  # "{conv}:{index}"

    def bucket(index: Any, low: Any, high: Any) -> Select[Any]:
        """The doc_id of bucket index, and its first and last wanted slot."""
        return select(
            (conv + separator + cast(index, String)).label("doc_id"),
            index.label("position"),
            low.label("low"),
            high.label("high"),
        ).where(last >= first_seq)

    wanted = union_all(
        bucket(oldest, first_seq - 1 - oldest * size, literal(size - 1)).where(oldest < newest),
        bucket(newest, greatest(first_seq - 1 - newest * size, 0), last - 1 - newest * size),
    ).subquery("wanted")
    return (
        select(docs.c.doc_id, cast(docs.c.msgs, Text).label("msgs"), wanted.c.low, wanted.c.high)
        .select_from(wanted.join(docs, docs.c.doc_id == wanted.c.doc_id))
        .order_by(wanted.c.position)
    )


def _greatest(dialect: str) -> Any:
    """GREATEST, typed as an integer (SQLite's many-argument max is its GREATEST)."""
    function = func.max if dialect == "sqlite" else func.greatest
    return lambda *values: type_coerce(function(*values), BigInteger)
