"""Copy everything one store holds into another, and check that both show the same.

``migrate(source, target)`` streams the source's slots, then its counters, per-user
watermarks and send claims, page by page (``MessageStore.scan``, ``SeqStore.scan_*``), and
writes them into the target through the store's own primitives (insert, revoke,
delete_for, mark_read, purge, raise_*, claim_sends), never through the permission-checked
service. Each write is idempotent, and a target slot is only ever completed, never
overwritten: a target already holding something the source does not is reported as a
conflict and left alone. So a run killed at any point and started again converges, and a
second run writes nothing. ``verify(source, target)`` compares both sides slot by slot (what
every viewer sees) and watermark by watermark. See docs/migrate.md.
"""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from imbucket.app import open_service
from imbucket.app.migrate_check import Checker
from imbucket.app.migrate_tally import Difference as Difference
from imbucket.app.migrate_tally import Progress as Progress
from imbucket.app.migrate_tally import Tally as Tally
from imbucket.app.migrate_tally import pages, pages_ahead, show, slots_by_conversation
from imbucket.app.registry import REGISTRY
from imbucket.app.service import MessageService
from imbucket.app.settings import load_settings, read_config_file
from imbucket.domain.errors import ConfigError, ImbucketError, StoreUnavailable
from imbucket.domain.migration import normalized, reachable, sizes_need_checking
from imbucket.domain.model import EMPTY_SLOT, Message, Slot, message_bytes, message_bytes_at_most
from imbucket.domain.scan import Counters, RowPage, UserSeqs
from imbucket.ports.bulk_load import BulkCounterLoad, BulkLoad, RowExport, RowLoad
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore

Endpoint = MessageService | Mapping[str, Any] | Path | str
DEFAULT_BATCH = 5000
_ATTEMPTS = 3  # tries of one page's batch when the target is unavailable (then it raises)
# The reader mark_read is given to set is_read: anyone but the sender does.
_READERS = ("imbucket-migrate", "imbucket-migrate-2")


class TargetConflict(ImbucketError):
    """The target already holds data that differs from the source's; it was not overwritten.

    Everything else was copied. ``tally.first`` lists the first differences.
    """

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        listed = "; ".join(str(d) for d in tally.first)
        super().__init__(f"{tally.differences} conflicting target entries: {listed}")


class EphemeralStore(ConfigError):
    """A migration endpoint keeps nothing once closed (memory, an in-memory SQLite database).

    As a source it is empty; as a target the copy would be gone when the run ends. A target
    is allowed with ``allow_ephemeral_target`` (experiments).
    """


class SameStore(ConfigError):
    """Source and target name one store: a migration into itself copies nothing."""


def load_config(path: Path | str) -> dict[str, Any]:
    """A settings dict from a TOML or JSON file shaped like an IMBUCKET_CONFIG file."""
    return read_config_file(path)


def where(config: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Where the store of a config keeps its data (settings file and environment applied).

    Equal for two configs naming one store; None for a store that keeps nothing once closed
    (backend memory, an in-memory SQLite URL): the backend's registered rules say which. A
    third-party backend is taken to persist, named by its url.
    """
    store = load_settings(config).store
    return REGISTRY.get(store.backend).location(store.url)


def check_endpoints(
    source: Endpoint,
    target: Endpoint,
    *,
    copying: bool = True,
    allow_ephemeral_target: bool = False,
) -> None:
    """Refuse a migration that cannot keep what it copies (typed errors, nothing opened).

    An ephemeral source or (when copying, unless allowed) target is EphemeralStore; a target
    that is the source's store is SameStore. Configs are resolved as open_service would; an
    open service is only compared by identity.
    """
    if source is target or (
        isinstance(source, MessageService)
        and isinstance(target, MessageService)
        and source.store is target.store
    ):
        raise SameStore("the source and the target are the same store")
    places: dict[str, tuple[str, ...] | None] = {}
    for role, endpoint in (("source", source), ("target", target)):
        if isinstance(endpoint, MessageService):
            continue
        config = endpoint if isinstance(endpoint, Mapping) else load_config(endpoint)
        places[role] = where(config)
        ephemeral = places[role] is None
        if ephemeral and (role == "source" or (copying and not allow_ephemeral_target)):
            raise EphemeralStore(_ephemeral(role, config, endpoint))
    if len(places) == 2 and places["source"] is not None and places["source"] == places["target"]:
        raise SameStore(
            f"the target is the source's store ({_named(source)} and {_named(target)} both "
            f"name {' '.join(places['source'])}); a migration needs another store to fill"
        )


def _named(endpoint: Endpoint) -> str:
    return str(endpoint) if isinstance(endpoint, Path | str) else "the config"


def _ephemeral(role: str, config: Mapping[str, Any], endpoint: Endpoint) -> str:
    store = load_settings(config).store
    what = (
        "backend 'memory'"
        if store.backend == "memory"
        else f"an in-memory SQLite database (store.url = {store.url!r})"
    )
    if role == "source":
        return f"the source ({_named(endpoint)}) is {what}, which holds nothing to copy"
    return (
        f"the target ({_named(endpoint)}) is {what}: the copy would be gone when the run ends; "
        "give it a store that persists (a file or server URL), or allow an ephemeral target "
        "explicitly (--allow-ephemeral-target, allow_ephemeral_target=True)"
    )


def open_endpoint(endpoint: Endpoint) -> MessageService:
    """The service of a config dict or file; a service is returned as given."""
    if isinstance(endpoint, MessageService):
        return endpoint
    if isinstance(endpoint, Path | str):
        return open_service(load_config(endpoint))
    return open_service(endpoint)


def migrate(
    source: Endpoint,
    target: Endpoint,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Progress | None = None,
    allow_ephemeral_target: bool = False,
) -> Tally:
    """Copy everything source holds into target; returns the tally of what was seen.

    Raises TargetConflict after copying everything else when the target held different
    data somewhere (listed, never overwritten). Safe to run again at any time. Before
    anything is opened, refuses (``check_endpoints``) a source or target config that keeps
    nothing once closed (EphemeralStore; allow_ephemeral_target lets a target through) and
    a target that is the source's store (SameStore).
    """
    if batch < 1:
        raise ConfigError("batch must be >= 1")
    check_endpoints(source, target, allow_ephemeral_target=allow_ephemeral_target)
    with _opened(source) as src, _opened(target) as dst, _collector_paused():
        copier = _Copier(src, dst, batch, progress or (lambda tally: None))
        copier.run()
    if copier.tally.differences:
        raise TargetConflict(copier.tally)
    return copier.tally


def verify(
    source: Endpoint,
    target: Endpoint,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Progress | None = None,
) -> Tally:
    """Compare both stores in both directions; ``tally.differences`` counts what differs.

    Slots are compared by what every viewer they name (and an anonymous one) sees, plus
    revoke, read state and pending tags; counters, per-user watermarks and send claims by
    value. The stores are only read. Refuses an ephemeral source and a target that is the
    source's store, as migrate does.
    """
    if batch < 1:
        raise ConfigError("batch must be >= 1")
    check_endpoints(source, target, copying=False)
    with _opened(source) as src, _opened(target) as dst:
        checker = Checker(src, dst, batch, progress or (lambda tally: None))
        checker.run()
    return checker.tally


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (restored after, as it was).

    A copy allocates a few objects per slot, page after page, and frees them as the page
    is written; they form no cycles, yet each burst of allocations makes the collector
    walk every live object, the pages in flight included.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _opened:
    """Open an endpoint for the duration of a with-block; close it only if we opened it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.service: MessageService | None = None

    def __enter__(self) -> MessageService:
        self.service = open_endpoint(self.endpoint)
        return self.service

    def __exit__(self, *exc: object) -> None:
        if self.service is not None and self.service is not self.endpoint:
            self.service.close()


def _aligned_scan(export: RowExport, align: int, after: str | None, limit: int) -> RowPage:
    return export.scan_rows(after, limit, align)


class _Copier:
    """One migration run."""

    def __init__(
        self, source: MessageService, target: MessageService, batch: int, progress: Progress
    ) -> None:
        self.source, self.target = source, target
        self.store: MessageStore = target.store
        self.seqs: SeqStore = target.seqs
        self.batch = batch
        self.progress = progress
        self.tally = Tally()
        self.bulk = self.store if isinstance(self.store, BulkLoad) else None
        self.bulk_counters = self.seqs if isinstance(self.seqs, BulkCounterLoad) else None
        self.sized = sizes_need_checking(source.limits, target.limits)

    def run(self) -> None:
        lane = self._row_lane()
        if lane is None:
            self._copy_pages()
        else:
            self._copy_rows(*lane)
        self.tally.phase = "watermarks"
        self._copy_counters()
        self._copy_user_seqs()
        self._copy_sends()
        self.tally.phase = "done"
        self.progress(self.tally)

    def _copy_pages(self) -> None:
        """Every page of the source's scan, as slots."""
        # The source is read one page ahead, while the target writes the page before.
        for page in pages_ahead(self.source.store.scan, self.batch):
            self.tally.saw_all(page.slots)
            grouped = slots_by_conversation(page.slots)
            self._retrying(self.store.batch, partial(self._copy_page, grouped))
            self.progress(self.tally)

    def _row_lane(self) -> tuple[RowExport, RowLoad] | None:
        """Source and target, when the target loads the source's rows as they are.

        Not when the target's limits need each message checked (their sizes differ).
        """
        source, target = self.source.store, self.store
        if not isinstance(source, RowExport) or not isinstance(target, RowLoad) or self.sized:
            return None
        return (source, target) if target.loads_rows(source.row_form) else None

    def _copy_rows(self, export: RowExport, load: RowLoad) -> None:
        """Every page through the row lane: plain rows loaded as they are, the rest as slots."""
        # Pages end between the target's units, so that each is loaded whole by one page.
        scan = partial(_aligned_scan, export, load.unit_seqs)
        for page in pages_ahead(scan, self.batch):
            self.tally.saw_keys(page.conversation_ids, page.messages)
            self._retrying(self.store.batch, partial(self._copy_row_page, export, load, page))
            self.progress(self.tally)

    def _copy_row_page(self, export: RowExport, load: RowLoad, page: RowPage) -> None:
        """A page's rows by the target's row load; what it left, and the page's slots, as slots."""
        loaded = load.load_new_rows(page.rows)
        count = sum(len(seqs) for seqs in loaded.values())
        self.tally.written += count
        rest = list(page.slots)
        if count < len(page.rows):
            rest += export.slots_of(page.rows, skip=loaded)
        if rest:
            self._copy_page(slots_by_conversation(rest))

    def _retrying(self, batch: Callable[[], Any], work: Callable[[], None]) -> None:
        """Run work inside one batch; after a StoreUnavailable, run it again (ATTEMPTS in all).

        On SQL the failed batch was rolled back, elsewhere it may have landed in part: either
        way its writes are idempotent and work reads the target again, so a second attempt
        completes it. What the failed attempt counted is forgotten.
        """
        for attempt in range(1, _ATTEMPTS + 1):
            written, differences, first = (
                self.tally.written,
                self.tally.differences,
                len(self.tally.first),
            )
            try:
                with batch():
                    work()
                return
            except StoreUnavailable:
                self.tally.written, self.tally.differences = written, differences
                del self.tally.first[first:]
                if attempt == _ATTEMPTS:
                    raise

    def _copy_page(self, page: dict[str, dict[int, Slot]]) -> None:
        """The units the target lacks by its bulk path, if it has one; the rest slot by slot."""
        rest = page if self.bulk is None else self._load_new(self.bulk, page)
        if rest:
            self._copy_slots(rest)

    def _load_new(
        self, bulk: BulkLoad, page: dict[str, dict[int, Slot]]
    ) -> dict[str, dict[int, Slot]]:
        """Load the slots whose target unit holds nothing (``BulkLoad``); returns the others.

        A slot the target's limits refuse is left to ``_copy_slots``, which reports it.
        """
        wanted = page
        if self.sized:
            wanted = {
                conversation_id: {s: v for s, v in slots.items() if self._refused(v) is None}
                for conversation_id, slots in page.items()
            }
        loaded = bulk.load_new(wanted)
        rest: dict[str, dict[int, Slot]] = {}
        for conversation_id, slots in page.items():
            done = loaded.get(conversation_id)
            if done is None:
                rest[conversation_id] = slots
                continue
            self.tally.written += len(done)
            if len(done) < len(slots):
                rest[conversation_id] = {s: v for s, v in slots.items() if s not in done}
        return rest

    def _copy_slots(self, wanted: dict[str, dict[int, Slot]]) -> None:
        """Complete each target slot of a page to the source's; conflicts are reported.

        The target's slots of the whole page are read in one ``get_many`` before and one
        after the writes.
        """
        before = self.store.get_many({conv: list(slots) for conv, slots in wanted.items()})
        todo: dict[str, dict[int, tuple[Slot, Slot]]] = {}
        for conversation_id, slots in wanted.items():
            for seq, slot in slots.items():
                current = normalized(before.get(conversation_id, {}).get(seq, EMPTY_SLOT))
                if current == slot:
                    continue
                refused = self._refused(slot)
                if refused is not None:
                    self._differ(conversation_id, seq, show(slot), refused)
                elif reachable(current, slot):
                    todo.setdefault(conversation_id, {})[seq] = (current, slot)
                else:
                    self._differ(conversation_id, seq, show(slot), show(current))
        if not todo:
            return
        self._complete(todo)
        after = self.store.get_many({conv: list(pairs) for conv, pairs in todo.items()})
        for conversation_id, pairs in todo.items():
            for seq, (_, slot) in pairs.items():
                landed = normalized(after.get(conversation_id, {}).get(seq, EMPTY_SLOT))
                if landed == slot:
                    self.tally.written += 1
                else:
                    self._differ(conversation_id, seq, show(slot), show(landed))

    def _differ(self, conversation_id: str, seq: int, source: str, target: str) -> None:
        self.tally.differ(Difference(conversation_id, f"seq {seq}", source, target))

    def _refused(self, slot: Slot) -> str | None:
        """Why the target's limits refuse slot's message (its buckets are sized by them)."""
        if slot.message is None or not self.sized:
            return None
        limits = self.target.limits
        if message_bytes_at_most(slot.message) <= limits.max_message_bytes:
            return None
        size = message_bytes(slot.message, limits.max_id_length)
        if size > limits.max_message_bytes:
            return f"too large for the target ({size} > limits.max_message_bytes)"
        return None

    def _complete(self, todo: dict[str, dict[int, tuple[Slot, Slot]]]) -> None:
        """Write what each target slot lacks, in an order every kill point can resume from.

        Early readers and deleters go first (early readers only stick before the message),
        then revokes, then the messages of the whole page in one ``insert_many``, then
        is_read (which needs the message).
        """
        store = self.store
        messages: dict[str, list[Message]] = {}
        for conversation_id, pairs in todo.items():
            purge = [seq for seq, (_, slot) in pairs.items() if slot.purged]
            if purge:
                store.purge(conversation_id, purge)
            rest = {seq: pair for seq, pair in pairs.items() if not pair[1].purged}
            self._tag(conversation_id, rest)
            found = [
                slot.message
                for current, slot in rest.values()
                if slot.message is not None and current.message is None
            ]
            if found:
                messages[conversation_id] = found
        if messages:
            store.insert_many(messages)
        for conversation_id, pairs in todo.items():
            marking: dict[str, list[int]] = defaultdict(list)
            for seq, (current, slot) in pairs.items():
                if slot.is_read and not current.is_read and slot.message is not None:
                    reader = next(r for r in _READERS if r != slot.message.send_id)
                    marking[reader].append(seq)
            for reader, seqs in marking.items():
                store.mark_read(conversation_id, seqs, reader)

    def _tag(self, conversation_id: str, rest: dict[int, tuple[Slot, Slot]]) -> None:
        """Early readers, deleters and revokes of one conversation's unpurged slots."""
        store = self.store
        readers: dict[str, list[int]] = defaultdict(list)
        deleters: dict[str, list[int]] = defaultdict(list)
        for seq, (current, slot) in rest.items():
            for reader in sorted(slot.read_by - current.read_by):
                readers[reader].append(seq)
            for user in sorted(slot.deleted_by - current.deleted_by):
                deleters[user].append(seq)
        for reader, seqs in readers.items():
            store.mark_read(conversation_id, seqs, reader)
        for user, seqs in deleters.items():
            store.delete_for(conversation_id, seqs, user)
        for seq, (current, slot) in rest.items():
            if slot.revoke is not None and current.revoke is None:
                store.revoke(conversation_id, seq, slot.revoke)

    def _copy_counters(self) -> None:
        for page in pages(self.source.seqs.scan_counters, self.batch):
            self._retrying(self.seqs.batch, partial(self._raise_counters, page.rows))
            self.tally.seq_rows += len(page.rows)
            self.progress(self.tally)

    def _raise_counters(self, rows: Sequence[Counters]) -> None:
        if self.bulk_counters is not None:
            loaded = self.bulk_counters.load_new_counters(rows)
            rows = [row for row in rows if row.conversation_id not in loaded]
        for row in rows:
            conv = row.conversation_id
            self._raise(conv, "max_seq", row.max_seq, partial(self.seqs.raise_max_seq, conv))
            self._raise(conv, "min_seq", row.min_seq, partial(self.seqs.raise_min_seq, conv))

    def _copy_user_seqs(self) -> None:
        for page in pages(self.source.seqs.scan_user_seqs, self.batch):
            self._retrying(self.seqs.batch, partial(self._raise_user_seqs, page.rows))
            self.tally.seq_rows += len(page.rows)
            self.progress(self.tally)

    def _raise_user_seqs(self, rows: Sequence[UserSeqs]) -> None:
        for row in rows:
            conv, user = row.conversation_id, row.user_id
            floor = partial(self.seqs.raise_user_min_seq, conv, user)
            self._raise(conv, f"user {user} min_seq", row.min_seq, floor)
            read = partial(self.seqs.raise_read_seq, conv, user)
            self._raise(conv, f"user {user} read_seq", row.read_seq, read)

    def _claim(
        self,
        claims: dict[tuple[str, int], dict[str, int]],
        recorded_by: dict[tuple[str, int], dict[str, int]],
    ) -> None:
        for key, wanted in claims.items():
            recorded_by[key] = self.seqs.claim_sends(key[0], wanted, at=key[1])

    def _raise(
        self, conversation_id: str, what: str, value: int, raise_: Callable[[int], int]
    ) -> None:
        """Raise a target watermark to the source's value; a higher target is a conflict."""
        if value <= 0:
            return
        got = raise_(value)
        if got != value:
            self.tally.differ(Difference(conversation_id, what, str(value), str(got)))

    def _copy_sends(self) -> None:
        for page in pages(self.source.seqs.scan_sends, self.batch):
            # Grouped by claim time too, so that each claim keeps its place in the retention window.
            claims: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
            for row in page.rows:
                self.tally.seq_rows += 1
                claims[row.conversation_id, row.claimed_at][row.client_msg_id] = row.seq
            recorded_by: dict[tuple[str, int], dict[str, int]] = {}
            self._retrying(self.seqs.batch, partial(self._claim, claims, recorded_by))
            for (conversation_id, at), wanted in claims.items():
                recorded = recorded_by[conversation_id, at]
                for cid, seq in wanted.items():
                    if recorded.get(cid) != seq:
                        self.tally.differ(
                            Difference(
                                conversation_id, f"send {cid}", str(seq), str(recorded.get(cid))
                            )
                        )
            self.progress(self.tally)
