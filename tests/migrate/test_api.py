"""The Python API of app.migrate on in-process stores: re-bucketing, conflicts, verify, kills."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemoryBucketRepository, MemorySeqStore
from imbucket.app import MessageService, open_service
from imbucket.app.migrate import TargetConflict, migrate, verify
from imbucket.domain.errors import StoreUnavailable
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Draft, Revoke, Role
from imbucket.domain.scan import SlotPage
from imbucket.testing.factories import message, messages
from imbucket.testing.migration_data import GROUP, LAST, SINGLE, fill, views
from tests.migrate.endpoints import SMALL_MESSAGES


def memory(bucket_size: int = 100, **store: Any) -> MessageService:
    config: dict[str, Any] = {"store": {"backend": "memory", "bucket_size": bucket_size, **store}}
    if bucket_size > 100:
        config["limits"] = SMALL_MESSAGES
    return open_service(config)


@pytest.fixture
def source() -> MessageService:
    service = memory(max_deleters_per_slot=1)
    fill(service, group_messages=230)  # every bucket of 37 up to LAST holds something
    return service


@pytest.mark.parametrize("size", [37, 500])
def test_rebucketing_keeps_every_view_and_lays_out_new_buckets(
    source: MessageService, size: int
) -> None:
    target = memory(size)
    migrate(source, target)
    assert verify(source, target).differences == 0
    assert views(target) == views(source)
    store = target.store
    assert isinstance(store, BucketMessageStore)
    buckets = {store.layout.doc_id(GROUP, seq) for seq in range(1, LAST + 1)}
    assert all(store.repository.bucket_bytes(doc_id) is not None for doc_id in buckets)
    assert len(buckets) == -(-LAST // size)


def test_memory_to_sql_and_back(source: MessageService) -> None:
    sql = open_service({"store": {"backend": "sql-row", "url": "sqlite://"}})
    back = memory(37)
    migrate(source, sql)
    migrate(sql, back)
    assert views(back) == views(source)
    assert verify(source, back).differences == 0


def test_a_second_run_writes_nothing(source: MessageService) -> None:
    target = memory()
    first = migrate(source, target)
    second = migrate(source, target)
    assert first.written == first.slots > 0
    assert (second.written, second.slots) == (0, first.slots)


def test_a_conflicting_target_is_reported_and_left_as_it_was(source: MessageService) -> None:
    target = memory()
    target.ingest(GROUP, [message(10, GROUP, content="not the source's")])
    target.store.revoke(GROUP, 11, Revoke("mallory", Role.OWNER))
    target.seqs.raise_max_seq(SINGLE, 99)
    target.send(GROUP, [Draft(send_id="zed", content="x", client_msg_id="send-2")])
    before = target.store.get(GROUP, [10, 11])

    with pytest.raises(TargetConflict) as raised:
        migrate(source, target)

    listed = {(d.conversation_id, d.what) for d in raised.value.tally.first}
    assert {
        (GROUP, "seq 10"),
        (GROUP, "seq 11"),
        (SINGLE, "max_seq"),
        (GROUP, "send send-2"),
    } <= listed
    assert raised.value.tally.differences == 4
    assert target.store.get(GROUP, [10, 11]) == before
    assert target.store.get(GROUP, [12]) == source.store.get(GROUP, [12])  # the rest is copied


def test_a_message_too_large_for_the_target_is_reported_not_copied(tmp_path: Path) -> None:
    source = memory()
    source.ingest(GROUP, [message(1, GROUP), message(2, GROUP, content="x" * 12_000)])
    url = f"sqlite:///{tmp_path / 'target.db'}"
    target = open_service({"store": {"backend": "sql-row", "url": url}, "limits": SMALL_MESSAGES})
    with target, pytest.raises(TargetConflict) as raised:
        migrate(source, target)
    with target:
        assert [d.what for d in raised.value.tally.first] == ["seq 2"]
        assert "too large for the target" in raised.value.tally.first[0].target
        assert list(target.store.get(GROUP, [1, 2])) == [1]


def test_verify_catches_each_planted_difference(source: MessageService) -> None:
    plants = [
        ("seq 20", lambda t: t.store.delete_for(GROUP, [20], "zed")),
        ("seq 100", lambda t: t.store.mark_read(GROUP, [100], "zed")),
        ("seq 232", lambda t: t.store.mark_read(GROUP, [232], "zed")),
        ("seq 236", lambda t: t.store.purge(GROUP, [236])),  # present in the target only
        ("max_seq", lambda t: t.seqs.raise_max_seq(GROUP, LAST + 1)),
        ("user bob read_seq", lambda t: t.seqs.raise_read_seq(GROUP, "bob", LAST)),
        ("user zed min_seq", lambda t: t.seqs.raise_user_min_seq(GROUP, "zed", 3)),
        ("send extra", lambda t: t.seqs.claim_sends(GROUP, {"extra": 4})),
    ]
    for what, plant in plants:
        target = memory()
        migrate(source, target)
        assert verify(source, target).differences == 0
        plant(target)
        found = verify(source, target)
        assert [(d.conversation_id, d.what) for d in found.first] == [(GROUP, what)], what


def test_source_pages_stay_bounded() -> None:
    source = memory()
    for first in range(1, 3000, 1000):
        source.ingest(GROUP, messages(first, first + 999, GROUP))
    sizes: list[int] = []
    scan = source.store.scan

    def recording(after: str | None, limit: int) -> SlotPage:
        page = scan(after, limit)
        sizes.append(len(page.slots))
        return page

    source.store.scan = recording  # type: ignore[method-assign]
    target = memory()
    assert migrate(source, target, batch=50).messages == 3000
    assert max(sizes) <= 100 and len(sizes) >= 30


class Killed(Exception):
    """The simulated kill."""


class _Dying:
    """A store or seq store that dies at its n-th write (the call does not happen)."""

    WRITES = frozenset(
        {
            "insert",
            "insert_many",
            "revoke",
            "delete_for",
            "mark_read",
            "purge",
            "raise_max_seq",
            "raise_min_seq",
            "raise_user_min_seq",
            "raise_read_seq",
            "claim_sends",
        }
    )

    def __init__(self, inner: Any, budget: list[int]) -> None:
        self.inner, self.budget = inner, budget

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in self.WRITES:
            return value

        def write(*args: Any, **kwargs: Any) -> Any:
            self.budget[0] -= 1
            if self.budget[0] < 0:
                raise Killed
            return value(*args, **kwargs)

        return write


def test_killed_before_any_one_of_its_writes_it_resumes_and_converges(
    source: MessageService,
) -> None:
    total = [10**6]
    counting = memory()
    migrate(source, MessageService(_Dying(counting.store, total), _Dying(counting.seqs, total)))
    writes = 10**6 - total[0]
    assert writes > 20
    for n in range(writes):
        target = memory(37)
        budget = [n]
        with pytest.raises(Killed):
            migrate(
                source, MessageService(_Dying(target.store, budget), _Dying(target.seqs, budget))
            )
        migrate(source, target)
        assert verify(source, target).differences == 0, n


class _DyingRepository(_Dying):
    """A bucket repository that dies at its n-th write: kill points inside ``insert_many``."""

    WRITES = frozenset(
        {
            "write_messages",
            "create_bucket",
            "set_revoke",
            "patch",
            "patch_many",
            "add_spilled",
            "drop_spilled",
        }
    )

    def create_buckets(self, buckets: Any) -> set[str]:
        """One write per bucket, so that a kill can fall between two of them."""
        return {doc_id for doc_id, slots in buckets.items() if self.create_bucket(doc_id, slots)}


def test_killed_inside_a_bulk_insert_it_resumes_and_converges(source: MessageService) -> None:
    def target(budget: list[int]) -> tuple[MemoryBucketRepository, MessageService]:
        repository = MemoryBucketRepository(BucketLayout(37))
        dying = BucketMessageStore(_DyingRepository(repository, budget))  # type: ignore[arg-type]
        return repository, MessageService(dying, MemorySeqStore())

    total = [10**6]
    migrate(source, target(total)[1])
    writes = 10**6 - total[0]
    assert writes > 10
    for n in range(writes):
        repository, killed = target([n])
        with pytest.raises(Killed):
            migrate(source, killed)
        resumed = MessageService(BucketMessageStore(repository), killed.seqs)
        migrate(source, resumed)
        assert verify(source, resumed).differences == 0, n


class _Flaky:
    """A store whose first `failures` batches fail as they end (their writes landed)."""

    def __init__(self, inner: Any, failures: int) -> None:
        self.inner, self.failures = inner, failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("the server went away")


def test_a_page_whose_batch_fails_is_tried_again(source: MessageService) -> None:
    target = memory(37)
    flaky = _Flaky(target.store, failures=2)  # twice on the first page: the third try lands
    tally = migrate(source, MessageService(flaky, target.seqs))  # type: ignore[arg-type]
    assert (tally.differences, flaky.failures) == (0, 0)
    assert verify(source, target).differences == 0


def test_a_page_failing_every_try_stops_the_run(source: MessageService) -> None:
    target = memory(37)
    flaky = _Flaky(target.store, failures=3)
    with pytest.raises(StoreUnavailable):
        migrate(source, MessageService(flaky, target.seqs))  # type: ignore[arg-type]
    migrate(source, target)  # run again: it resumes
    assert verify(source, target).differences == 0
