"""A database in OpenIM's exact shape (tests/openim_fixture.py) opened by openim-mongo."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from typer.testing import CliRunner

from imbucket.app import MessageService, open_service
from imbucket.app.cli import cli
from imbucket.app.migrate import migrate, verify
from imbucket.bench.traffic import load_traffic
from imbucket.domain.errors import OpenimIncompatible
from imbucket.domain.model import Actor, Draft, Role, SessionType
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from tests import openim_fixture
from tests.openim_fixture import OpenimData
from tests.redis_server import redis_url


@pytest.fixture
def openim(mongo_url: str) -> Iterator[tuple[str, Any, OpenimData]]:
    """A database OpenIM wrote, its Redis allocator, and what it holds."""
    import redis

    client: MongoClient[dict[str, Any]] = MongoClient(mongo_url)
    cache = redis.Redis.from_url(redis_url(), decode_responses=True)
    data = openim_fixture.write(client.get_default_database(), cache)
    yield mongo_url, client.get_default_database(), data
    cache.delete(*(f"MALLOC_SEQ:{c}" for c in data.allocated))
    cache.close()
    client.close()


def config(url: str, with_redis: bool = True) -> dict[str, Any]:
    separator = "&" if "?" in url else "?"
    store_url = f"{url}{separator}openim_redis={redis_url()}" if with_redis else url
    return {"store": {"backend": "openim-mongo", "url": store_url}}


def shown(entries: list[Any]) -> list[Any]:
    """Each entry as the seq and content shown, or the tombstone's reason."""
    return [
        (e.seq, e.reason) if isinstance(e, Tombstone) else (e.seq, e.message.content)
        for e in entries
    ]


def test_it_opens_and_reads_without_changing_a_byte(openim: Any) -> None:
    url, db, data = openim
    before = openim_fixture.snapshot(db)
    service = open_service(config(url))
    service.pull_latest(data.group, "bob", 50)
    service.pull(data.single, "bob", [1, 2, 3, 4, 5])
    service.stats()
    service.close()
    assert openim_fixture.snapshot(db) == before
    assert before["seq.indexes"][1:] == [("conversation_id_1", (("conversation_id", 1),), False)]


def test_pulls_follow_openim_s_semantics(openim: Any) -> None:
    url, _, data = openim
    service = open_service(config(url))
    group = data.group
    # The allocated maximum (MALLOC_SEQ), not seq's reservation ceiling of 200.
    assert service.max_seq(group) == 130
    latest = service.pull_latest(group, "alice", 3)
    assert [e.seq for e in latest] == [128, 129, 130]
    assert all(isinstance(e, MessageView) for e in latest)
    bob = service.pull(group, "bob", [2, 3, 5, 6, 7, 8, 9, 10])
    assert [(e.seq, getattr(e, "reason", None)) for e in bob][:1] == [(2, TombstoneReason.CLEARED)]
    assert bob[5] == Tombstone(8, TombstoneReason.DELETED)  # bob's own delete
    assert bob[6] == Tombstone(9, TombstoneReason.PURGED)  # OpenIM's {msg: null}
    revoked = {e.seq: e.revoked for e in bob if isinstance(e, MessageView) and e.revoked}
    assert {seq: (r.role, r.user_id) for seq, r in revoked.items()} == {
        5: (0, "imAdmin"),  # an app admin's revoke: role 0
        6: (60, "carol"),
        7: (100, "olivia"),
    }
    alice_8 = service.pull(group, "alice", [8])[0]
    assert isinstance(alice_8, MessageView)  # only bob deleted it
    # dave left at 100: nothing after it is his to see.
    assert [e.seq for e in service.pull_latest(group, "dave", 2)] == [99, 100]
    assert shown(service.pull(group, "dave", [101])) == [(101, TombstoneReason.UNALLOCATED)]
    at = service.pull(group, "alice", [12])[0]
    assert isinstance(at, MessageView)
    assert at.message.at_user_id_list == ("bob", "carol")
    assert at.message.offline_push is not None and at.message.offline_push.ios_badge_count
    assert at.message.sender_face_url.startswith("https://face/")
    single = service.pull(data.single, "alice", [1, 2, 3, 4, 5])
    assert [getattr(e, "is_read", None) for e in single] == [True, True, True, False, False]
    assert [e.revoked.role if e.revoked else None for e in single] == [None, None, None, 1, None]
    assert service.seqs.read_seq(group, "carol") == 50


def test_without_redis_the_allocated_maximum_is_the_newest_stored_message(openim: Any) -> None:
    url, _, data = openim
    service = open_service(config(url, with_redis=False))
    assert service.max_seq(data.group) == 130
    assert service.max_seq(data.single) == 5
    assert [e.seq for e in service.pull_latest(data.group, "alice", 2)] == [129, 130]


def test_writes_are_refused_and_change_nothing(openim: Any) -> None:
    url, db, data = openim
    before = openim_fixture.snapshot(db)
    service = open_service(config(url))
    draft = Draft("alice", "hi", "c-new", session_type=SessionType.GROUP, group_id="g")
    attempts = [
        lambda: service.send(data.group, [draft]),
        lambda: service.revoke(data.group, 20, Actor("alice", Role.APP_ADMIN)),
        lambda: service.delete_for_me(data.group, [20], "bob"),
        lambda: service.mark_read(data.single, [5], "bob"),
        lambda: service.purge(data.group, [20], Actor("olivia", Role.OWNER)),
        lambda: service.clear_history(data.group, "bob"),
    ]
    for attempt in attempts:
        with pytest.raises(OpenimIncompatible):
            attempt()
    assert openim_fixture.snapshot(db) == before


@pytest.mark.parametrize("backend", ["sql-row", "sql-bucket"])
def test_it_migrates_verified(openim: Any, backend: str, tmp_path: Any) -> None:
    url, _, data = openim
    target = {"store": {"backend": backend, "url": f"sqlite:///{tmp_path / 'to.db'}"}}
    tally = migrate(config(url), target)
    assert tally.differences == 0
    # dave left at 100: no other store keeps his ceiling, and verify says so.
    checked = verify(config(url), target)
    assert [(d.what, d.source, d.target) for d in checked.first] == [
        ("user dave max_seq", "100", "0")
    ]
    copied: MessageService = open_service(target)
    source = open_service(config(url))
    for viewer in ("alice", "bob", "carol"):
        seqs = list(range(1, 131))
        assert copied.pull(data.group, viewer, seqs) == source.pull(data.group, viewer, seqs)


def toml(path: Any, store: dict[str, Any], extra: str = "") -> Any:
    lines = [f'{key} = "{value}"' for key, value in store.items()]
    path.write_text("[store]\n" + "\n".join(lines) + "\n" + extra)
    return path


def test_profile_derives_the_traffic_of_an_openim_database(openim: Any, tmp_path: Any) -> None:
    url, _, data = openim
    ids = f'[profile]\nconversations = ["{data.group}", "{data.single}"]\nsample = 50\n'
    path = toml(tmp_path / "profile.toml", config(url)["store"], ids)
    out = tmp_path / "traffic.toml"
    result = CliRunner().invoke(cli, ["profile", "--config", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    traffic = load_traffic(out)
    assert (traffic.single_chats, traffic.single_mean, traffic.groups) == (1, 5.0, 1)
    assert traffic.group_share == pytest.approx(129 / 134, abs=1e-3)  # seq 9 was purged


def test_the_migrate_command_copies_an_openim_database(openim: Any, tmp_path: Any) -> None:
    url, _, data = openim
    source = toml(tmp_path / "openim.toml", config(url)["store"])
    target = toml(tmp_path / "to.toml", {"backend": "sql-bucket",
                                         "url": f"sqlite:///{tmp_path / 'to.db'}"})  # fmt: skip
    result = CliRunner().invoke(cli, ["migrate", "--from", str(source), "--to", str(target)])
    assert result.exit_code == 0, result.output
    checked = CliRunner().invoke(
        cli, ["migrate", "--verify-only", "--from", str(source), "--to", str(target)]
    )
    assert checked.exit_code == 1 and "user dave max_seq" in checked.output
    with open_service({"store": {"backend": "sql-bucket",
                                 "url": f"sqlite:///{tmp_path / 'to.db'}"}}) as copied:  # fmt: skip
        assert copied.max_seq(data.group) == 130
        assert copied.seqs.read_seq(data.group, "carol") == 50
