"""Wiring of the MongoDB backends that needs no server: URLs, lazy imports, failing fast."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from pymongo.errors import OperationFailure, ServerSelectionTimeoutError
from typer.testing import CliRunner

from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.app import open_service
from imbucket.app.backends import Backend, version_of
from imbucket.app.cli import cli
from imbucket.domain.errors import ConfigError, StoreUnavailable

# Nothing listens on port 1: the connection is refused at once, and the short timeout
# ends server selection quickly.
UNREACHABLE = "mongodb://app:s3cret@127.0.0.1:1/chat?serverSelectionTimeoutMS=100"


@pytest.fixture
def connection() -> Iterator[MongoConnection]:
    opened = MongoConnection(UNREACHABLE)
    yield opened
    opened.close()


def test_database_name_comes_from_the_url_path(connection: MongoConnection) -> None:
    assert connection.db.name == "chat"


@pytest.mark.parametrize("url", ["", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"])
def test_database_name_defaults_to_imbucket(url: str) -> None:
    opened = MongoConnection(url)
    try:
        assert opened.db.name == "imbucket"
    finally:
        opened.close()


def test_a_malformed_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid MongoDB URL"):
        MongoConnection("http://127.0.0.1/chat")


@pytest.mark.parametrize("backend", ["mongo-bucket", "mongo-row"])
def test_an_unreachable_server_fails_the_open_with_a_clear_error(backend: str) -> None:
    with pytest.raises(StoreUnavailable, match=r"MongoDB is unreachable \(.*\): 127\.0\.0\.1:1"):
        open_service({"store": {"backend": backend, "url": UNREACHABLE}})


def test_driver_errors_become_store_unavailable() -> None:
    unreachable = r"^MongoDB is unreachable \(read\): x:1: refused$"
    with pytest.raises(StoreUnavailable, match=unreachable), translated("read"):
        raise ServerSelectionTimeoutError("x:1: refused, Timeout: 0.1s, Topology Description")
    failed = "MongoDB failed to write tags: not primary"
    with pytest.raises(StoreUnavailable, match=failed), translated("write tags"):
        raise OperationFailure("not primary", code=10107)


def test_backends_command_reports_an_unreachable_mongodb_without_its_password() -> None:
    env = {"IMBUCKET_STORE__BACKEND": "mongo-bucket", "IMBUCKET_STORE__URL": UNREACHABLE}
    result = CliRunner().invoke(cli, ["backends"], env=env)
    output = " ".join(result.output.split())  # rich wraps long lines
    assert result.exit_code == 1
    assert "unreachable: store mongo-bucket @ mongodb://app:***@127.0.0.1:1/chat" in output
    assert "MongoDB is unreachable" in output
    assert "s3cret" not in output


def test_backends_command_without_a_version_says_nothing_more() -> None:
    result = CliRunner().invoke(cli, ["backends"], env={"IMBUCKET_STORE__BACKEND": "memory"})
    assert result.exit_code == 0
    assert "reachable" in result.output and "(" not in result.output.splitlines()[-1]


def test_a_backend_may_name_its_server_version() -> None:
    service = open_service({"store": {"backend": "memory"}})
    plain = Backend(service.store, service.seqs)
    assert version_of(plain) == ""
    assert version_of(Backend(service.store, service.seqs, lambda: "MongoDB 7.0.12")) == (
        "MongoDB 7.0.12"
    )


def test_importing_the_app_does_not_import_the_driver() -> None:
    code = (
        "import sys, imbucket, imbucket.app.backends, imbucket.app.container, imbucket.app.cli;"
        "imbucket.open_service({'store': {'backend': 'memory'}}).close();"
        "print('pymongo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
