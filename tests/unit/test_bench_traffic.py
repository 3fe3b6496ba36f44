"""A team's own traffic: the [traffic] table, the dataset it shapes, and `imbucket profile`."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from imbucket.app import open_service
from imbucket.bench import profile
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.bench.traffic import Traffic, default_mix, load_traffic, parse_traffic, to_toml
from imbucket.bench.workloads import WORKLOAD_NAMES
from imbucket.domain.errors import ConfigError

TINY = SCALES["tiny"]


def test_no_traffic_and_an_empty_table_give_the_built_in_dataset() -> None:
    built_in = Dataset(TINY, 7)
    for traffic in (Traffic(), parse_traffic({})):
        same = Dataset(TINY, 7, traffic)
        assert same.conversations == built_in.conversations
        conv = built_in.largest
        assert same.message(conv, 5) == built_in.message(conv, 5)
    assert built_in.reported_traffic() is None


def test_the_shape_parameters_shape_the_dataset() -> None:
    traffic = parse_traffic(
        {
            "single_chats": 40,
            "single_mean": 3,
            "groups": 2,
            "group_share": 0.9,
            "giants": [300],
            "text_median": 200,
            "text_sigma": 0,
            "text_max": 250,
            "picture_share": 0,
        },
        source="team.toml",
    )
    data = Dataset(TINY, 7, traffic)
    singles = [c.size for c in data.conversations if not c.is_group]
    groups = [c.size for c in data.conversations if c.is_group]
    assert len(singles) == 40 and len(groups) == 3 and 300 in groups
    # 90 % of the messages in groups: 9 × the 1:1 chats' 40 × 3 expected, giants included
    assert 1_075 <= sum(groups) <= 1_080
    texts = [data.message(c, 1).content for c in data.conversations]
    assert {len(t) // 10 for t in texts} <= {19, 20}  # sigma 0: every text near the median
    reported = data.reported_traffic()
    assert reported is not None and reported.source == "team.toml"


def test_group_share_sets_the_group_messages_against_the_singles() -> None:
    shape = Traffic(single_chats=100, single_mean=10, group_share=0.75, giants=(500,)).shape(TINY)
    assert shape.group_messages == 3_000 - 500


@pytest.mark.parametrize(
    "table",
    [
        {"single_chats": 0},
        {"single_chats": 2.5},
        {"group_share": 1},
        {"group_share": -0.1},
        {"picture_share": 2},
        {"single_mean": 0.5},
        {"group_skew": 0},
        {"text_median": "long"},
        {"giants": 5},
        {"giants": [0]},
        {"mix": {"teleport": 1}},
        {"mix": {"pull_latest": 0}},
        {"read_share": True},
        {"colour": "blue"},
    ],
)
def test_bad_traffic_is_refused_naming_the_key(table: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match="traffic"):
        parse_traffic(table, known_workloads=WORKLOAD_NAMES)


def test_the_mix_follows_the_read_share_unless_given() -> None:
    assert sum(default_mix(0.9)[n] for n in ("pull_latest", "pull_range", "pull_scattered")) == (
        pytest.approx(0.9, abs=0.001)
    )
    assert Traffic(read_share=0.5).weights()["ingest"] == pytest.approx(0.3)
    assert Traffic(mix={"pull_latest": 2.0}).weights() == {"pull_latest": 2.0}


def test_a_traffic_file_round_trips_through_toml(tmp_path: Path) -> None:
    traffic = Traffic(single_chats=10, single_mean=2.5, giants=(1_000,), text_median=12.0)
    path = tmp_path / "traffic.toml"
    path.write_text(to_toml(traffic, "made by a test"))
    assert tomllib.loads(path.read_text())["traffic"]["giants"] == [1000]
    loaded = load_traffic(path)
    assert (loaded.single_chats, loaded.single_mean, loaded.giants) == (10, 2.5, (1_000,))
    assert loaded.source == str(path)


def test_profile_derives_the_shape_of_a_store(tmp_path: Path) -> None:
    data = Dataset(TINY, 3)
    with open_service({"store": {"backend": "memory"}}) as service:
        for batch in data.batches():
            service.ingest(batch.conversation.id, data.messages_of(batch))
        ids = [c.id for c in data.conversations] + ["si_nobody_never"]
        req = profile.request({"backend": "memory"}, ids, {"sample": 30, "messages": 1_000})
        found = profile.profile(service, req)
    assert found.empty == 1
    assert sorted(found.single_sizes + found.group_sizes) == sorted(
        c.size for c in data.conversations
    )
    assert len(found.group_sizes) == 4
    traffic = found.traffic(req.messages)
    scale = 1_000 / data.messages
    assert traffic.single_chats == round(60 * scale)
    assert traffic.groups is not None and traffic.group_share is not None
    assert traffic.group_share == pytest.approx(sum(found.group_sizes) / data.messages, abs=1e-3)
    assert 15 <= traffic.text_median <= 60  # the built-in log-normal median is 30
    assert found.sampled == sum(min(30, c.size) for c in data.conversations)
    Dataset(TINY, 3, traffic)  # the derived table shapes a dataset


def test_a_profile_request_needs_a_store_and_conversations(tmp_path: Path) -> None:
    path = tmp_path / "profile.toml"
    (tmp_path / "ids.txt").write_text("sg_a\n\nsi_b_c\n")
    path.write_text('[store]\nbackend = "memory"\n[profile]\nconversations_file = "ids.txt"\n')
    assert profile.load_request(path).conversations == ("sg_a", "si_b_c")
    for text in ('[profile]\nconversations = ["a"]\n', '[store]\nbackend = "memory"\n'):
        path.write_text(text)
        with pytest.raises(ConfigError):
            profile.load_request(path)
    with pytest.raises(ConfigError):
        profile.request({"backend": "memory"}, ["a"], {"sample": 0})


def test_the_profile_command_writes_a_traffic_table_bench_can_read(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from imbucket.app.cli import cli
    from imbucket.testing.factories import draft

    url = f"sqlite:///{tmp_path / 'chat.sqlite'}"
    with open_service({"store": {"backend": "sql-row", "url": url}}) as service:
        service.send("sg_team", [draft(n) for n in range(30)])
        service.send(
            "si_a_b", [draft(n, session_type=1, group_id="", recv_id="b") for n in range(4)]
        )
    config = tmp_path / "profile.toml"
    config.write_text(
        f'[store]\nbackend = "sql-row"\nurl = "{url}"\n'
        '[profile]\nconversations = ["sg_team", "si_a_b"]\nsample = 10\n'
    )
    out = tmp_path / "traffic.toml"
    result = CliRunner().invoke(cli, ["profile", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    traffic = load_traffic(out)
    assert (traffic.single_chats, traffic.single_mean, traffic.groups) == (1, 4.0, 1)
    assert traffic.group_share == pytest.approx(30 / 34, abs=1e-4)
    assert "1 1:1 chats and 1 groups holding 34 messages" in out.read_text()
    bad = CliRunner().invoke(cli, ["profile", "--config", str(tmp_path / "missing.toml")])
    assert bad.exit_code == 2 and "cannot read profile config" in bad.output
