"""Where the test servers are: IMBUCKET_TEST_<NAME>_URL, else testcontainers, else skip.

Probing happens only when a fixture asks, never at import time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import cache

import pytest

_containers = ExitStack()


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception as error:  # any failure means: no engine to use
        return f"no Docker engine ({type(error).__name__})"
    return None


@cache
def server_url(name: str, start_container: Callable[[ExitStack], str] | None = None) -> str:
    """URL of a test server, or pytest.skip with the reason shown in the summary."""
    variable = f"IMBUCKET_TEST_{name.upper()}_URL"
    url = os.environ.get(variable)
    if url:
        return url
    if start_container is not None:
        reason = docker_available()
        if reason is None:
            return start_container(_containers)
    else:
        reason = "no container recipe"
    pytest.skip(f"{name}: {variable} is not set and {reason}")


def close_containers() -> Iterator[None]:
    """Session finaliser stopping every container started by server_url."""
    yield
    _containers.close()
