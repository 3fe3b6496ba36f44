"""Verification: both stores compared in both directions, slot by slot and row by row."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from imbucket.app.migrate_tally import Difference, Progress, Tally, by_conversation, pages, show
from imbucket.app.service import MessageService
from imbucket.domain.migration import same_views
from imbucket.domain.model import Slot
from imbucket.domain.scan import Counters, SendClaim, SeqPage, UserSeqs
from imbucket.ports.seq_store import SeqStore


class Checker:
    """One verification run: source against target, then target against source."""

    def __init__(
        self, source: MessageService, target: MessageService, batch: int, progress: Progress
    ) -> None:
        self.source, self.target = source, target
        self.batch = batch
        self.progress = progress
        self.tally = Tally(phase="verify slots")

    def run(self) -> None:
        """Compare slots both ways, then counters, per-user watermarks and send claims."""
        self._slots(self.source, self.target, count=True)
        self._slots(self.target, self.source, count=False)
        self.tally.phase = "verify watermarks"
        for scan in ("scan_counters", "scan_user_seqs", "scan_sends"):
            self._rows(scan)
        self.tally.phase = "done"
        self.progress(self.tally)

    def _slots(self, one: MessageService, other: MessageService, *, count: bool) -> None:
        """Slots of one compared with other's; the second pass only reports what one lacks."""
        for page in pages(one.store.scan, self.batch):
            grouped = by_conversation(page.slots)
            wanted = {conv: [item.seq for item in items] for conv, items in grouped.items()}
            found_by = other.store.get_many(wanted)
            for conversation_id, items in grouped.items():
                found = found_by.get(conversation_id, {})
                for item in items:
                    if count:
                        self.tally.saw(item)
                    theirs = found.get(item.seq)
                    if count and not same_views(item.seq, item.slot, theirs):
                        self._differ(conversation_id, f"seq {item.seq}", item.slot, theirs)
                    elif not count and theirs is None:
                        self._differ(conversation_id, f"seq {item.seq}", None, item.slot)
            self.progress(self.tally)

    def _differ(
        self, conversation_id: str, what: str, source: Slot | None, target: Slot | None
    ) -> None:
        self.tally.differ(Difference(conversation_id, what, show(source), show(target)))

    def _rows(self, scan: str) -> None:
        """Seq-store rows compared both ways, each difference reported once."""
        for forward in (True, False):
            one, other = (self.source, self.target) if forward else (self.target, self.source)
            scanned: Iterator[SeqPage[Any]] = pages(getattr(one.seqs, scan), self.batch)
            for page in scanned:
                values = _values(page.rows, other.seqs)
                for row, found in zip(page.rows, values, strict=True):
                    self.tally.seq_rows += forward
                    for what, mine, theirs in found:
                        if mine != theirs and (forward or theirs == 0):
                            source, target = (mine, theirs) if forward else (theirs, mine)
                            self.tally.differ(
                                Difference(row.conversation_id, what, str(source), str(target))
                            )
                self.progress(self.tally)


def _values(rows: Sequence[Any], seqs: SeqStore) -> list[list[tuple[str, int, int]]]:
    """Per scanned seq-store row: (what, this row's value, the other store's value).

    The other store is read once per page (``counters_of``, ``user_seqs_of``, and
    ``sent_seqs`` once per conversation of the page).
    """
    counters = seqs.counters_of([r.conversation_id for r in rows if isinstance(r, Counters)])
    users = seqs.user_seqs_of(
        [(r.conversation_id, r.user_id) for r in rows if isinstance(r, UserSeqs)]
    )
    claims: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if isinstance(row, SendClaim):
            claims[row.conversation_id].append(row.client_msg_id)
    sent = {conv: seqs.sent_seqs(conv, cids) for conv, cids in claims.items()}
    values: list[list[tuple[str, int, int]]] = []
    for row in rows:
        conv = row.conversation_id
        if isinstance(row, Counters):
            theirs = counters[conv]
            values.append(
                [("max_seq", row.max_seq, theirs.max_seq), ("min_seq", row.min_seq, theirs.min_seq)]
            )
        elif isinstance(row, UserSeqs):
            user = users[conv, row.user_id]
            found = [
                (f"user {row.user_id} min_seq", row.min_seq, user.min_seq),
                (f"user {row.user_id} read_seq", row.read_seq, user.read_seq),
            ]
            if row.max_seq:  # a ceiling the other store may not hold: what that user sees
                ceiling = seqs.watermarks(conv, row.user_id).user_max_seq
                found.append((f"user {row.user_id} max_seq", row.max_seq, ceiling))
            values.append(found)
        else:
            recorded = sent[conv].get(row.client_msg_id, 0)
            values.append([(f"send {row.client_msg_id}", row.seq, recorded)])
    return values
