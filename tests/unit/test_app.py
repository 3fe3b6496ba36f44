"""Settings, container selection and the CLI."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import MemorySeqStore
from imbucket.app import open_service
from imbucket.app.cli import cli
from imbucket.app.service import MessageService
from imbucket.app.settings import load_settings
from imbucket.domain.errors import ConfigError
from imbucket.testing.factories import CONV, draft


def test_defaults_are_the_embedded_memory_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMBUCKET_CONFIG", raising=False)
    settings = load_settings()
    assert settings.store.backend == "memory"
    assert settings.store.bucket_size == 100
    assert settings.cache.backend == "none"
    assert settings.cache.ttl_seconds == 86_400


def test_environment_nested_with_double_underscore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMBUCKET_STORE__BUCKET_SIZE", "50")
    monkeypatch.setenv("IMBUCKET_LIMITS__MAX_CONTENT_BYTES", "10")
    settings = load_settings()
    assert settings.store.bucket_size == 50
    assert settings.limits.max_content_bytes == 10


def test_file_then_env_then_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "imbucket.toml"
    config.write_text('[store]\nbucket_size = 20\n[cache]\nttl_seconds = 60\nkey_prefix = "f"\n')
    monkeypatch.setenv("IMBUCKET_CONFIG", str(config))
    monkeypatch.setenv("IMBUCKET_CACHE__TTL_SECONDS", "90")
    settings = load_settings({"cache": {"key_prefix": "o"}})
    assert settings.store.bucket_size == 20
    assert settings.cache.ttl_seconds == 90
    assert settings.cache.key_prefix == "o"


def test_json_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "imbucket.json"
    config.write_text(json.dumps({"store": {"bucket_size": 30}}))
    monkeypatch.setenv("IMBUCKET_CONFIG", str(config))
    assert load_settings().store.bucket_size == 30


@pytest.mark.parametrize(
    "config",
    [
        {"store": {"backend": "oracle"}},
        {"store": {"bucket_size": 0}},
        {"cache": {"backend": "memcached"}},
        {"stor": {}},
    ],
)
def test_invalid_configuration_is_a_config_error(config: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        open_service(config)


def test_a_redis_cluster_no_node_of_which_answers_is_a_config_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    config = {"cache": {"backend": "redis-cluster", "url": f"redis://127.0.0.1:{port}"}}
    with pytest.raises(ConfigError, match="no cluster node answers"):
        open_service(config)


@pytest.mark.parametrize("failures", [1, 2, 3])
def test_a_cluster_slow_to_answer_at_start_is_asked_again_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from imbucket.adapters import redis_client

    asked: list[str] = []
    client = object()

    def topology(url: str, **_: object) -> object:
        asked.append(url)
        if len(asked) <= failures:
            raise RedisTimeoutError("Timeout connecting to server")
        return client

    monkeypatch.setattr(redis_client.RedisCluster, "from_url", topology)
    if failures < redis_client.TOPOLOGY_ATTEMPTS:
        assert redis_client.make_client("redis://node:7000", cluster=True) is client
        assert len(asked) == failures + 1
    else:
        with pytest.raises(RedisTimeoutError):
            redis_client.make_client("redis://node:7000", cluster=True)
        assert len(asked) == redis_client.TOPOLOGY_ATTEMPTS


def test_missing_config_file_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMBUCKET_CONFIG", "/nonexistent/imbucket.toml")
    with pytest.raises(ConfigError):
        load_settings()


def test_memory_backend_wiring() -> None:
    with open_service({"store": {"backend": "memory", "bucket_size": 10}}) as service:
        assert isinstance(service, MessageService)
        assert isinstance(service.store, BucketMessageStore)
        assert isinstance(service.seqs, MemorySeqStore)
        assert service.layout.size == 10
        service.send(CONV, [draft(n) for n in range(11)])
        assert service.inspect(CONV, 11).doc_id == f"{CONV}:1"


def test_limits_come_from_config() -> None:
    with open_service({"limits": {"max_seqs_per_call": 5}}) as service:
        assert service.limits.max_seqs_per_call == 5


def test_selecting_memory_imports_no_server_driver() -> None:
    code = (
        "import sys; from imbucket.app import open_service; open_service().max_seq('c'); "
        "print(sorted(m for m in ('pymongo', 'redis', 'psycopg', 'pymysql') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


runner = CliRunner()


def test_cli_demo_shows_each_users_view() -> None:
    result = runner.invoke(cli, ["demo"])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if "│" in line}
    assert "<deleted>" in rows["5"]  # bob deleted seq 5 for himself
    assert rows["5"].count("Meeting moved") == 3
    assert rows["6"].count("revoked by carol") == 4
    assert "oops" not in rows["6"]
    assert rows["1"].count("<cleared>") == 1  # dave only
    assert rows["7"].count("<missing>") == 4
    assert rows["151"].count("<purged>") == 4
    assert rows["153"].count("<unallocated>") == 4


def test_cli_inspect_locates_seq_150() -> None:
    result = runner.invoke(cli, ["inspect", "demo-conversation", "150"])
    assert result.exit_code == 0, result.output
    assert "doc index     1" in result.output
    assert "slot index    49" in result.output
    assert "demo-conversation:1" in result.output
    assert '"content": "chatter #150"' in result.output


def test_cli_inspect_rejects_bad_seq() -> None:
    result = runner.invoke(cli, ["inspect", "demo-conversation", "0"])
    assert result.exit_code == 2
    assert "InvalidSeq" in result.output


def test_cli_backends_reports_reachability() -> None:
    result = runner.invoke(cli, ["backends"])
    assert result.exit_code == 0, result.output
    assert "reachable" in result.output and "memory" in result.output
