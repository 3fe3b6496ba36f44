"""Tag writes racing the first message of a bucket (or row): nothing is lost or misreported.

Each test lets the tag write miss because the seq's bucket (row) does not exist yet, and has
a concurrent sender store the seq's message right then — injected deterministically by
wrapping the storage primitive the write just called (or, where the write learnt from its read
that the bucket is missing and goes straight to creating it, the one it is about to call),
never by timing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.sql.dml import Update

from imbucket.app import MessageService
from imbucket.domain.model import Actor, ContentType, Role
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, draft, message
from imbucket.testing.rows import BUCKETS, EARLY_TAGS, SQL, backends, needs

OWNER = Actor("olivia", Role.OWNER)
SEQ = 101  # the first seq of the second bucket at the default bucket size


def allocate_next_bucket(service: MessageService) -> None:
    """Seqs 1-100 sent (bucket 0 full), seq 101 allocated but its message not stored yet."""
    service.send(CONV, [draft(n) for n in range(1, 101)])
    assert service.seqs.allocate(CONV, 1) == SEQ


def concurrent_sender(service: MessageService) -> Callable[[], None]:
    """Stores the pending message of SEQ, as the sender that allocated it would."""

    def send() -> None:
        assert service.store.insert(CONV, [message(SEQ)]).inserted == (SEQ,)

    return send


Missed = Callable[[tuple[Any, ...], Any], bool]


def returned_false(_args: tuple[Any, ...], done: Any) -> bool:
    return done is False


def on_first_miss(target: Any, name: str, miss: Missed, act: Callable[[], None]) -> None:
    """Wrap target.name so that act runs right after the first call that misses."""
    original = getattr(target, name)
    armed = [True]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if armed[0] and miss(args, result):
            armed[0] = False
            act()
        return result

    setattr(target, name, wrapped)


def just_before(target: Any, name: str, act: Callable[[], None]) -> None:
    """Wrap target.name so that act runs once, right before its first call."""
    original = getattr(target, name)
    armed = [True]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            armed[0] = False
            act()
        return original(*args, **kwargs)

    setattr(target, name, wrapped)


def assert_revoked_for_everyone(service: MessageService) -> None:
    for viewer in ("alice", "bob"):
        seen = service.pull(CONV, viewer, [SEQ])[0]
        assert isinstance(seen, MessageView)
        assert seen.revoked is not None and seen.revoked.user_id == OWNER.user_id
        assert seen.content_type == ContentType.REVOKE_NOTIFICATION
        assert f"message {SEQ}" not in seen.content


@pytest.mark.parametrize("backend_config", backends(BUCKETS), indirect=True)
class TestBucketTagWritesRacingTheBucketCreation:
    """The bucket state machine's tag writes when a sender creates the bucket in between."""

    def test_revoke_is_not_lost(self, service: MessageService) -> None:
        allocate_next_bucket(service)
        repository = service.store.repository  # type: ignore[attr-defined]
        on_first_miss(repository, "set_revoke", returned_false, concurrent_sender(service))
        assert service.revoke(CONV, SEQ, OWNER) is True
        assert_revoked_for_everyone(service)

    def test_delete_for_me_is_not_lost(self, service: MessageService) -> None:
        allocate_next_bucket(service)
        repository = service.store.repository  # type: ignore[attr-defined]
        # The write's read found no bucket: the sender creates it before the write does.
        just_before(repository, "create_buckets", concurrent_sender(service))
        assert service.delete_for_me(CONV, [SEQ], "bob") == 1
        assert service.pull(CONV, "bob", [SEQ])[0] == Tombstone(SEQ, TombstoneReason.DELETED)
        assert isinstance(service.pull(CONV, "carol", [SEQ])[0], MessageView)

    @needs(EARLY_TAGS)
    def test_mark_read_is_not_lost(self, service: MessageService) -> None:
        allocate_next_bucket(service)
        repository = service.store.repository  # type: ignore[attr-defined]
        # The write's read found no bucket: the sender creates it before the write does.
        just_before(repository, "create_buckets", concurrent_sender(service))
        assert service.mark_read(CONV, [SEQ], "bob") == 1
        assert service.store.get(CONV, [SEQ])[SEQ].read

    def test_purge_is_not_lost(self, service: MessageService) -> None:
        allocate_next_bucket(service)
        repository = service.store.repository  # type: ignore[attr-defined]
        # The write's read found no bucket: the sender creates it before the write does.
        just_before(repository, "create_buckets", concurrent_sender(service))
        assert service.purge(CONV, [SEQ], OWNER) == 1
        assert service.pull(CONV, "bob", [SEQ])[0] == Tombstone(SEQ, TombstoneReason.PURGED)
        assert service.store.get(CONV, [SEQ])[SEQ].message is None


SQL_ROWS = [row for row in backends(SQL) if str(row.id).startswith("sql-row")]


@pytest.mark.parametrize("backend_config", SQL_ROWS, indirect=True)
def test_sql_row_revoke_is_not_lost_when_the_row_appears_in_between(
    service: MessageService,
) -> None:
    """sql-row: the conditional UPDATE misses the absent row, a sender inserts it, then the
    INSERT of a revoke-only row hits the key: the final UPDATE must still revoke it."""
    allocate_next_bucket(service)
    db = service.store.db  # type: ignore[attr-defined]

    def update_missed(args: tuple[Any, ...], outcome: Any) -> bool:
        return isinstance(args[0], Update) and outcome.rowcount == 0

    on_first_miss(db, "execute", update_missed, concurrent_sender(service))
    assert service.revoke(CONV, SEQ, OWNER) is True
    assert_revoked_for_everyone(service)
