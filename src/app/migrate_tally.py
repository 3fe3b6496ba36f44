"""What a migration or verification run has seen, and the scan helpers both runs share."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from imbucket.domain.migration import normalized
from imbucket.domain.model import Slot
from imbucket.domain.scan import ScannedSlot

REPORTED = 20  # differences kept in a report (all are counted)


@dataclass(frozen=True, slots=True)
class Difference:
    """One place where source and target disagree."""

    conversation_id: str
    what: str  # "seq 17", "max_seq", "user bob read_seq", "send c-1"
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.what}: source {self.source}, target {self.target}"


@dataclass(slots=True)
class Tally:
    """What a run has seen so far; ``progress`` callbacks get it after every page."""

    phase: str = "slots"
    conversations: int = 0
    slots: int = 0
    messages: int = 0
    written: int = 0  # slots or seq rows this run changed in the target
    seq_rows: int = 0
    differences: int = 0
    first: list[Difference] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    _last_conversation: str | None = None

    @property
    def seconds(self) -> float:
        """Time since the run started."""
        return time.perf_counter() - self.started

    def saw(self, item: ScannedSlot) -> None:
        """Count one scanned slot (a new conversation when the id changes)."""
        if item.conversation_id != self._last_conversation:
            self.conversations += 1
            self._last_conversation = item.conversation_id
        self.slots += 1
        self.messages += item.slot.message is not None

    def saw_all(self, items: Sequence[ScannedSlot]) -> None:
        """Count a page's scanned slots, as ``saw`` does one by one."""
        messages = sum(1 for item in items if item.slot.message is not None)
        self.saw_keys([item.conversation_id for item in items], messages)

    def saw_keys(self, conversation_ids: Sequence[str], messages: int) -> None:
        """Count a page's slots by their conversations (in key order) and its messages."""
        if not conversation_ids:
            return
        runs = sum(1 for _ in itertools.groupby(conversation_ids))
        self.conversations += runs - (conversation_ids[0] == self._last_conversation)
        self._last_conversation = conversation_ids[-1]
        self.slots += len(conversation_ids)
        self.messages += messages

    def differ(self, difference: Difference) -> None:
        """Count a difference; keep the first REPORTED of them."""
        self.differences += 1
        if len(self.first) < REPORTED:
            self.first.append(difference)


Progress = Callable[[Tally], None]


def pages(scan: Callable[[str | None, int], Any], batch: int) -> Iterator[Any]:
    """Every page of a scan, following cursors until the last page."""
    cursor: str | None = None
    while True:
        page = scan(cursor, batch)
        yield page
        cursor = page.cursor
        if cursor is None:
            return


def pages_ahead(scan: Callable[[str | None, int], Any], batch: int) -> Iterator[Any]:
    """``pages``, read by a thread of its own one page ahead of the caller.

    So that the source is read while the caller writes the page before. An error of the
    scan is raised to the caller at the page it would have produced; a caller that stops
    early (an error of its own, a closed generator) stops the reader after its current page.
    """
    ahead: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            for page in pages(scan, batch):
                while not stop.is_set():
                    try:
                        ahead.put(("page", page), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
        except BaseException as error:  # handed to the caller, raised there
            ahead.put(("error", error))
            return
        ahead.put(("end", None))

    reader = threading.Thread(target=read, name="migrate-source", daemon=True)
    reader.start()
    try:
        while True:
            kind, value = ahead.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        while reader.is_alive():  # let a reader blocked on a full queue see the stop
            try:
                ahead.get_nowait()
            except queue.Empty:
                reader.join(0.1)


def by_conversation(items: tuple[ScannedSlot, ...]) -> dict[str, list[ScannedSlot]]:
    """A page's scanned slots grouped by conversation, in scan order."""
    grouped: dict[str, list[ScannedSlot]] = defaultdict(list)
    for item in items:
        grouped[item.conversation_id].append(item)
    return grouped


def slots_by_conversation(items: Sequence[ScannedSlot]) -> dict[str, dict[int, Slot]]:
    """A page's slots by conversation and seq, as ``MessageStore.get`` shows them."""
    grouped: dict[str, dict[int, Slot]] = {}
    for item in items:
        slots = grouped.get(item.conversation_id)
        if slots is None:
            slots = grouped[item.conversation_id] = {}
        slot = item.slot
        slots[item.seq] = normalized(slot) if slot.spilled else slot
    return grouped


def show(slot: Slot | None) -> str:
    """A slot in a difference's words: nothing, purged, or what it holds."""
    if slot is None or slot.is_empty:
        return "nothing"
    if slot.purged:
        return "purged"
    parts = [] if slot.message is None else [f"message {slot.message.client_msg_id!r}"]
    parts += [] if slot.revoke is None else [f"revoked by {slot.revoke.user_id}"]
    parts += [f"deleted by {sorted(slot.deleted_by)}"] if slot.deleted_by else []
    parts += [f"early readers {sorted(slot.read_by)}"] if slot.read_by else []
    parts += ["read"] if slot.is_read else []
    return ", ".join(parts)
