"""``imbucket migrate`` from sql-row into a SQL store of the row lane: rows copied, not decoded.

A sql-row source hands out its scan pages with the plain slots (no deleter, no early reader)
left as message rows (``RowExport``); a sql-row target, and a sql-bucket target in the compact
encoding, write them without building a Slot (``RowLoad``). These tests pin that the pages
hold what ``scan`` holds, that no plain row is decoded on the way into an empty target, and
that a target already holding part of the data is completed through the slot path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from imbucket.adapters.sql import row_scan
from imbucket.app import MessageService, open_service
from imbucket.app.migrate import migrate, verify
from imbucket.domain.scan import ScannedSlot
from imbucket.ports.bulk_load import RowExport, RowLoad
from imbucket.testing.factories import messages
from imbucket.testing.migration_data import GROUP, fill, views
from tests.whitebox.test_migrate_bulk import ENGINES, LAYOUTS, _target


def _row_source(
    folder: Path, conversations: int = 12, per_conversation: int = 30
) -> MessageService:
    """A sql-row store on an SQLite file: migration_data's states, and plain conversations."""
    folder.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{folder / 'source.sqlite'}"
    service = open_service({"store": {"backend": "sql-row", "url": url}})
    fill(service)
    for n in range(conversations):
        conversation = f"si_lane_{n:03d}"
        service.ingest(conversation, messages(1, per_conversation, conversation))
    return service


def _key(item: ScannedSlot) -> tuple[str, int]:
    return (item.conversation_id, item.seq)


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 64, 5000])
def test_a_row_page_holds_the_scan_page_and_its_cursor(limit: int, tmp_path: Path) -> None:
    with _row_source(tmp_path) as source:
        store = source.store
        assert isinstance(store, RowExport)
        cursor: str | None = None
        pages = 0
        while True:
            page, rows = store.scan(cursor, limit), store.scan_rows(cursor, limit)
            assert rows.cursor == page.cursor
            decoded = sorted([*store.slots_of(rows.rows), *rows.slots], key=_key)
            assert decoded == list(page.slots)
            assert list(rows.conversation_ids) == [item.conversation_id for item in page.slots]
            assert rows.messages == sum(1 for i in page.slots if i.slot.message is not None)
            pages += 1
            cursor = page.cursor
            if cursor is None:
                break
        assert pages >= (3 if limit <= 64 else 1)


@pytest.mark.parametrize(("limit", "align"), [(7, 37), (64, 37), (64, 100), (150, 100), (5, 1000)])
def test_aligned_row_pages_end_between_units_and_hold_every_slot_once(
    limit: int, align: int, tmp_path: Path
) -> None:
    with _row_source(tmp_path) as source:
        store = source.store
        assert isinstance(store, RowExport)
        everything = [item for page in _pages(store.scan) for item in page.slots]
        seen: list[ScannedSlot] = []
        cursor: str | None = None
        for _ in range(10_000):
            page = store.scan_rows(cursor, limit, align)
            held = sorted([*store.slots_of(page.rows), *page.slots], key=_key)
            assert len(held) <= limit
            seen += held
            cursor = page.cursor
            if cursor is None:
                break
            conversation, seq = json.loads(cursor)
            whole = seq % align == 0 or not held or held[0].conversation_id != conversation
            assert whole or (held[0].seq - 1) // align == (seq - 1) // align  # one unit's part
        assert cursor is None
        assert seen == everything


def _pages(scan: Any, limit: int = 100) -> list[Any]:
    pages, cursor = [], None
    while True:
        page = scan(cursor, limit)
        pages.append(page)
        cursor = page.cursor
        if cursor is None:
            return pages


def test_rows_of_a_page_are_plain_and_tagged_slots_come_decoded(tmp_path: Path) -> None:
    with _row_source(tmp_path) as source:
        assert isinstance(source.store, RowExport)
        page = source.store.scan_rows(None, 5000)
        tagged = {item.seq for item in page.slots if item.conversation_id == GROUP}
        assert {6, 100, 231, 232, 233} <= tagged  # deleters and early readers
        assert all(item.slot.deleted_by or item.slot.read_by for item in page.slots)
        assert len(page.rows) + len(page.slots) == len(page.conversation_ids)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("engine", ENGINES)
def test_an_empty_target_takes_the_plain_rows_without_decoding_them(
    engine: str, layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[int] = []
    untagged = row_scan._untagged_slots

    def counting(rows: Any) -> list[ScannedSlot]:
        decoded.append(len(rows))
        return untagged(rows)

    with (
        _row_source(tmp_path / "source") as source,
        _target(engine, layout, tmp_path / "target") as target,
    ):
        assert isinstance(target.store, RowLoad)
        monkeypatch.setattr(row_scan, "_untagged_slots", counting)
        tally = migrate(source, target)  # one page: no bucket continues on the next
        monkeypatch.undo()
        assert decoded == []
        assert tally.differences == 0
        assert (tally.written, tally.messages) == (tally.slots, source.stats().messages)
        assert verify(source, target).differences == 0
        assert views(target) == views(source)
        again = migrate(source, target, batch=100)
        assert (again.written, again.differences, again.slots) == (0, 0, tally.slots)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_target_holding_part_of_the_rows_is_completed_through_the_slot_path(
    layout: str, tmp_path: Path
) -> None:
    with (
        _row_source(tmp_path / "source") as source,
        _target("sqlite", layout, tmp_path / "target") as target,
    ):
        held = messages(1, 10, "si_lane_003")
        target.ingest("si_lane_003", held)
        target.ingest("si_lane_005", messages(30, 30, "si_lane_005"))
        tally = migrate(source, target, batch=100)
        assert tally.differences == 0
        assert tally.written == tally.slots - len(held) - 1
        assert verify(source, target).differences == 0
        assert views(target) == views(source)


def test_an_openim_encoded_bucket_target_takes_slots(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'openim.sqlite'}"
    config = {"store": {"backend": "sql-bucket", "url": url, "bucket_encoding": "openim"}}
    with _row_source(tmp_path) as source, open_service(config) as target:
        assert not target.store.loads_rows(source.store.row_form)  # type: ignore[attr-defined]
        assert migrate(source, target, batch=100).differences == 0
        assert verify(source, target).differences == 0


def test_the_lane_is_not_taken_into_a_store_of_other_limits(tmp_path: Path) -> None:
    small = {"max_message_bytes": 2048}
    url = f"sqlite:///{tmp_path / 'small.sqlite'}"
    with (
        _row_source(tmp_path) as source,
        open_service({"store": {"backend": "sql-row", "url": url}, "limits": small}) as target,
    ):
        scanned: list[str | None] = []
        assert isinstance(source.store, RowExport)
        scan_rows = source.store.scan_rows

        def recording(after: str | None, limit: int) -> Any:
            scanned.append(after)
            return scan_rows(after, limit)

        source.store.scan_rows = recording  # type: ignore[method-assign]
        assert migrate(source, target, batch=100).differences == 0
        assert scanned == []
        assert verify(source, target).differences == 0
