"""What the MongoDB adapters make of the server's replies, as pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imbucket.adapters.codec import conversation_of, slot_from_doc
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.commands import spill_entry
from imbucket.domain.errors import LayoutMismatch, StoreUnavailable
from imbucket.domain.model import Slot, StoreStats, TableStats, Watermarks

Doc = dict[str, Any]

DUPLICATE_KEY = 11000


def bucket_slots(
    wanted: Mapping[str, Sequence[int]], found: Iterable[Doc]
) -> dict[str, dict[int, Slot]]:
    """Slots by index per existing bucket, from the read aggregate's documents."""
    buckets: dict[str, dict[int, Slot]] = {}
    for doc in found:
        doc_id = doc["doc_id"]
        conversation_id = conversation_of(doc_id)
        buckets[doc_id] = {
            index: slot_from_doc(conversation_id, slot)
            for index, slot in zip(wanted[doc_id], doc["msgs"], strict=True)
        }
    return buckets


def viewed_slots(
    wanted: Mapping[str, Sequence[int]], found: Iterable[Doc]
) -> dict[str, dict[int, tuple[Slot, int]]]:
    """Slots and inline deleter counts per existing bucket, from a viewer's read aggregate."""
    buckets: dict[str, dict[int, tuple[Slot, int]]] = {}
    for doc in found:
        doc_id = doc["doc_id"]
        conversation_id = conversation_of(doc_id)
        buckets[doc_id] = {
            index: (slot_from_doc(conversation_id, slot), int(slot.get("del_count") or 0))
            for index, slot in zip(wanted[doc_id], doc["msgs"], strict=True)
        }
    return buckets


def spilled_users(found: Iterable[Doc]) -> dict[str, dict[int, set[str]]]:
    """Spilled deleters by doc_id and slot, from their documents (``commands.spill_key``)."""
    users: dict[str, dict[int, set[str]]] = {}
    for doc in found:
        doc_id, slot, user_id = spill_entry(doc["doc_id"])
        users.setdefault(doc_id, {}).setdefault(slot, set()).add(user_id)
    return users


def bucket_bytes(found: Iterable[Doc]) -> int | None:
    """The size the bucket_size aggregate returned, None when the bucket does not exist."""
    sizes = [int(doc["bytes"]) for doc in found]
    return sizes[0] if sizes else None


def row_slots(found: Iterable[Doc]) -> dict[int, Slot]:
    """Slots by seq from row documents."""
    return {int(doc["_id"]["s"]): slot_from_doc(doc["_id"]["c"], doc) for doc in found}


def duplicate_positions(details: Mapping[str, Any]) -> list[int]:
    """Positions of the operations of a bulk write that failed on a duplicate key.

    Any other write error, or a write concern error, means the write cannot be trusted.
    """
    if details.get("writeConcernErrors"):
        raise StoreUnavailable(f"MongoDB write concern failed: {details['writeConcernErrors']}")
    errors = details.get("writeErrors", [])
    other = [error for error in errors if error.get("code") != DUPLICATE_KEY]
    if other:
        raise StoreUnavailable(f"MongoDB bulk write failed: {other[0].get('errmsg', other[0])}")
    return [error["index"] for error in errors]


def watermarks(found: Iterable[Doc]) -> Watermarks:
    """Merge the conversation counters and the user's floor (either may be absent)."""
    merged: Doc = {}
    for doc in found:
        merged.update(doc)
    return Watermarks(
        int(merged.get("max_seq", 0)),
        int(merged.get("min_seq", 0)),
        int(merged.get("user_min_seq", 0)),
    )


def view_reply(found: Iterable[Doc]) -> tuple[Watermarks, list[Doc]]:
    """The marks and the buckets or rows found, from a ``bucket_view`` / ``row_view`` reply.

    Every document carries the marks; each holds one bucket or row under ``found``, except
    a lone document when nothing was found. No document: neither watermark document exists.
    """
    marks = Watermarks()
    joined: list[Doc] = []
    for n, doc in enumerate(found):
        if n == 0:
            marks = Watermarks(int(doc["max_seq"]), int(doc["min_seq"]), int(doc["user_min_seq"]))
        if "found" in doc:
            joined.append(doc["found"])
    return marks, joined


def union_reply(found: Iterable[Doc]) -> tuple[Watermarks, list[Doc]]:
    """The marks and the rows, from a ``listed_row_view`` reply (rows are those with _id)."""
    marks = Watermarks()
    rows: list[Doc] = []
    for doc in found:
        if "_id" in doc:
            rows.append(doc)
        else:
            marks = Watermarks(int(doc["max_seq"]), int(doc["min_seq"]), int(doc["user_min_seq"]))
    return marks, rows


@dataclass(frozen=True, slots=True)
class ReaderMarks:
    """What a mark-read's read found besides the slots: max_seq and the reader's read seq."""

    max_seq: int = 0
    read_seq: int = 0


def marked_reply(found: Iterable[Doc], key: str) -> tuple[ReaderMarks, list[Doc]]:
    """The marks and the rows or buckets (documents holding key, not read_seq) of a marked read.

    See ``commands.marked_rows`` / ``commands.marked_buckets``: the reader's document (keyed
    as the data are) carries read_seq, the counter's max_seq (0 where a document or its
    field is missing).
    """
    marks: Doc = {}
    data: list[Doc] = []
    for doc in found:
        if key in doc and "read_seq" not in doc:
            data.append(doc)
        else:
            marks.update(doc)
    return ReaderMarks(int(marks.get("max_seq", 0)), int(marks.get("read_seq", 0))), data


def viewed_bucket_seqs(
    conversation_id: str, buckets: Iterable[Doc]
) -> tuple[dict[int, Slot], dict[str, dict[int, set[str]]]]:
    """The viewer-scoped slots by seq and the viewer's side-table entries, from buckets.

    buckets: those of a ``bucket_view`` reply; the entries are the ones found in their
    flagged slots, shaped as ``spilled_users`` shapes them.
    """
    slots: dict[int, Slot] = {}
    entries: list[Doc] = []
    for bucket in buckets:
        slots.update((int(s["seq"]), slot_from_doc(conversation_id, s)) for s in bucket["msgs"])
        entries += bucket.get("spilled", ())
    return slots, spilled_users(entries)


def checked_layout(recorded: Mapping[str, Any] | None, bucket_size: int, collection: str) -> None:
    """Refuse to open a collection created with another bucket size."""
    stored = None if recorded is None else recorded.get("bucket_size")
    if stored != bucket_size:
        raise LayoutMismatch(
            f"collection {collection!r} was created with bucket size {stored}, "
            f"opened with {bucket_size}"
        )


def store_stats(
    storage: Iterable[Doc],
    counted: Iterable[Doc],
    *,
    clustered: bool = False,
) -> StoreStats:
    """StoreStats from ``$collStats`` (one document per shard) and a message count.

    A clustered collection has no separate _id index: its key bytes live in the records,
    so they are reported as the index part (``key_bytes`` of the count). The documents that
    are no bucket or row (``aside_docs``: user documents, send claims, spilled deleters) are
    taken out of the documents, the user documents' and claims' bytes (``user_bytes``) out of
    the data, and the claims' own indexes out of the index bytes.
    """
    documents = data = index = 0
    for doc in storage:
        stats = doc["storageStats"]
        documents += stats.get("count", 0)
        data += stats.get("size", 0)
        index += stats.get("totalIndexSize", 0) - claim_index_bytes(stats)
    totals = next(iter(counted), {})
    if clustered:
        index += totals.get("key_bytes", 0)
    # The user documents kept in the data collection (commands.UserDocs) are not its data.
    documents -= totals.get("aside_docs", 0)
    data = max(0, data - totals.get("user_bytes", 0))
    return StoreStats(totals.get("messages", 0), documents, data, index)


def version_tuple(info: Mapping[str, Any]) -> tuple[int, ...]:
    """The server's version as ints, from buildInfo."""
    array = info.get("versionArray")
    if array:
        return tuple(int(part) for part in array)
    return tuple(int(part) for part in str(info["version"]).split("-")[0].split("."))


def claim_index_bytes(stats: Mapping[str, Any]) -> int:
    """The bytes of the send claims' indexes (``commands.CLAIM_INDEXES``) in storageStats."""
    sizes = stats.get("indexSizes") or {}
    return sum(int(sizes.get(spec.name, 0)) for spec in commands.CLAIM_INDEXES)


def claim_stats(storage: Iterable[Doc], counted: Iterable[Doc]) -> TableStats:
    """The send claims kept in a data collection: their number, BSON and index bytes.

    storage: its ``$collStats`` (one document per shard); counted: ``claim_footprint``.
    """
    index = sum(claim_index_bytes(doc["storageStats"]) for doc in storage)
    totals = next(iter(counted), {})
    return TableStats(int(totals.get("claims", 0)), int(totals.get("bytes", 0)) + index)


def table_stats(storage: Iterable[Doc]) -> TableStats:
    """Documents and bytes (data and indexes) of a side collection, from ``$collStats``."""
    rows = size = 0
    for doc in storage:
        stats = doc["storageStats"]
        rows += stats.get("count", 0)
        size += stats.get("size", 0) + stats.get("totalIndexSize", 0)
    return TableStats(rows, size)


def epoch_ms(value: object) -> int:
    """A BSON date read back (naive UTC, pymongo's default) as epoch ms; 0 when absent."""
    if not isinstance(value, datetime):
        return 0
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1000)


EMULATOR_GIT_VERSION = "mongoeco"  # what mongoeco's buildInfo answers as gitVersion


def server_version(info: Mapping[str, Any]) -> str:
    """The server named from its buildInfo, e.g. ``MongoDB 7.0.12``.

    mongoeco answers ``version: 7.0.0`` for the protocol it speaks and ``gitVersion:
    "mongoeco"``, not its own release: it is named ``mongoeco (MongoDB 7.0 wire protocol)``.
    """
    if is_emulator(info):
        major, minor = version_tuple(info)[:2]
        return f"mongoeco (MongoDB {major}.{minor} wire protocol)"
    return f"MongoDB {info['version']}"


def is_emulator(info: Mapping[str, Any]) -> bool:
    """Whether buildInfo comes from mongoeco rather than a MongoDB server."""
    return info.get("gitVersion") == EMULATOR_GIT_VERSION
