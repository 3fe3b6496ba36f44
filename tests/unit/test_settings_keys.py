"""Unknown settings keys are refused at every level of every source, naming the closest one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from imbucket.app import open_service
from imbucket.app.migrate import load_config
from imbucket.app.settings import load_settings
from imbucket.domain.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IMBUCKET_CONFIG", raising=False)


@pytest.mark.parametrize(
    ("config", "named", "closest"),
    [
        (
            {"store": {"backend": "memory", "buckt_size": 50}},
            "store.buckt_size",
            "store.bucket_size",
        ),
        ({"cache": {"ttl": 60}}, "cache.ttl", "cache.ttl_seconds"),
        ({"limits": {"max_content": 10}}, "limits.max_content", "limits.max_content_bytes"),
        ({"stor": {"backend": "memory"}}, "stor", "store"),
    ],
)
def test_an_unknown_override_key_is_named_with_the_closest_one(
    config: dict[str, Any], named: str, closest: str
) -> None:
    with pytest.raises(
        ConfigError, match=re.escape(f"unknown setting '{named}'; did you mean '{closest}'")
    ):
        open_service(config)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_an_unknown_key_in_the_config_file_is_named_with_the_file(
    suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / f"imbucket{suffix}"
    if suffix == ".toml":
        path.write_text('[store]\nbackend = "memory"\nbuckt_size = 50\n')
    else:
        path.write_text(json.dumps({"store": {"backend": "memory", "buckt_size": 50}}))
    monkeypatch.setenv("IMBUCKET_CONFIG", str(path))
    expected = f"unknown setting 'store.buckt_size' in {path}; did you mean 'store.bucket_size'"
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_settings()


def test_migrate_refuses_an_unknown_key_in_its_config_files(tmp_path: Path) -> None:
    path = tmp_path / "target.toml"
    path.write_text("[cache]\nttl = 5\n")
    with pytest.raises(
        ConfigError, match=re.escape(f"'cache.ttl' in {path}; did you mean 'cache.ttl_seconds'")
    ):
        load_config(path)


@pytest.mark.parametrize(
    ("variable", "fix"),
    [
        ("IMBUCKET_STORE__BUCKT_SIZE", "IMBUCKET_STORE__BUCKET_SIZE"),
        ("imbucket_cache__ttl", "IMBUCKET_CACHE__TTL_SECONDS"),
        ("IMBUCKET_STOR__URL", "IMBUCKET_STORE__URL"),
        ("IMBUCKET_LIMITS__MAX_CONTENT_BYTES__X", "IMBUCKET_LIMITS__MAX_CONTENT_BYTES"),
    ],
)
def test_an_environment_variable_naming_no_setting_is_refused(
    variable: str, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "50")
    with pytest.raises(
        ConfigError, match=re.escape(f"environment variable {variable} names no setting")
    ) as e:
        load_settings()
    assert f"did you mean {fix}?" in str(e.value)


def test_a_json_section_in_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMBUCKET_STORE", json.dumps({"buckt_size": 50}))
    with pytest.raises(
        ConfigError, match=re.escape("'store.buckt_size'; did you mean 'store.bucket_size'")
    ):
        load_settings()


def test_other_imbucket_variables_are_not_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMBUCKET_TEST_SOMETHING_URL", "x")
    monkeypatch.setenv("IMBUCKET_STORE__BUCKET_SIZE", "50")
    assert load_settings().store.bucket_size == 50
