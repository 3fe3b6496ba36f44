"""Where the test servers are: IMBUCKET_TEST_<NAME>_URL, else testcontainers, else a local
stand-in when the server has one (MongoDB: tests/mongo_emulator.py), else skip.

Probing happens only when a fixture asks, never at import time. ``origins`` says, per server
name, where its URL came from, for the end-of-session summary.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import cache

import pytest

_containers = ExitStack()
origins: dict[str, str] = {}

Starter = Callable[[ExitStack], str]


class NoServer(Exception):
    """A local stand-in cannot run on this machine; the message says why."""


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception as error:  # any failure means: no engine to use
        return f"no Docker engine ({type(error).__name__})"
    return None


@cache
def server_url(
    name: str, start_container: Starter | None = None, start_local: Starter | None = None
) -> str:
    """URL of a test server, or pytest.skip with the reason shown in the summary.

    start_local starts a stand-in when neither the variable nor Docker gives a server; it
    raises NoServer when it cannot run here. With IMBUCKET_TEST_REQUIRE_<NAME>=1 (CI), a
    server that cannot be had fails the test instead of skipping it.
    """
    variable = f"IMBUCKET_TEST_{name.upper()}_URL"
    url = os.environ.get(variable)
    if url:
        origins[name] = variable
        return url
    reason = "no container recipe"
    if start_container is not None:
        reason = docker_available() or ""
        if not reason:
            origins[name] = "a Docker container"
            return start_container(_containers)
    if start_local is not None:
        try:
            return start_local(_containers)
        except NoServer as error:
            reason = f"{reason}, and {error}"
    message = f"{name}: {variable} is not set and {reason}"
    if os.environ.get(f"IMBUCKET_TEST_REQUIRE_{name.upper()}") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def close_containers() -> Iterator[None]:
    """Session finaliser stopping every container started by server_url."""
    yield
    _containers.close()
