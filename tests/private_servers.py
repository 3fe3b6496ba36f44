"""Helpers of the clusters the suite starts itself (Redis Cluster, Galera, Patroni)."""

from __future__ import annotations

import os
import socket
from typing import Any


def free_ports(count: int) -> list[int]:
    """count distinct free loopback ports (held open together, so none repeats)."""
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    try:
        return [listener.getsockname()[1] for listener in listeners]
    finally:
        for listener in listeners:
            listener.close()


def as_user(user: str) -> dict[str, Any]:
    """Popen arguments that run a server as user when the tests run as root."""
    return {"user": user, "group": user} if os.geteuid() == 0 else {}
