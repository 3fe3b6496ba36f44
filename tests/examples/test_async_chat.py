"""examples/async-chat: the Starlette chat service on imbucket.aio, driven over HTTP in process."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "async-chat" / "chat_app.py"


def _chat_app() -> Any:
    spec = importlib.util.spec_from_file_location("chat_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("chat_app", module)
    spec.loader.exec_module(module)
    return module


def run(tmp_path: Path, scenario: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    """scenario against the example app on a SQLite file, its lifespan opening the service."""
    config = {"store": {"backend": "sql-row", "url": f"sqlite:///{tmp_path / 'chat.db'}"}}
    app = _chat_app().create_app(config)

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://chat") as client:
                await scenario(client)

    asyncio.run(main())


async def _send(client: httpx.AsyncClient, sender: str, text: str, msg_id: str) -> int:
    body = {"send_id": sender, "content": text, "client_msg_id": msg_id, "recv_id": "bob"}
    response = await client.post("/conversations/si_alice_bob/messages", json=body)
    assert response.status_code == 200, response.text
    seq: int = response.json()["seq"]
    return seq


async def _entries(client: httpx.AsyncClient, query: str) -> list[dict[str, Any]]:
    response = await client.get(f"/conversations/si_alice_bob/messages?{query}")
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


def test_send_is_idempotent_and_pulls_by_range_and_latest(tmp_path: Path) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        first = await _send(client, "alice", "hi", "c-1")
        again = await _send(client, "alice", "hi", "c-1")
        second = await _send(client, "alice", "there", "c-2")
        assert (first, again, second) == (1, 1, 2)
        latest = await _entries(client, "viewer=bob&latest=20")
        assert [(e["seq"], e["content"]) for e in latest] == [(1, "hi"), (2, "there")]
        ranged = await _entries(client, "viewer=bob&first=2&last=3")
        assert ranged == [
            {"seq": 2, "send_id": "alice", "content": "there"},
            {"seq": 3, "tombstone": "unallocated"},
        ]

    run(tmp_path, scenario)


def test_revoke_shows_everyone_a_notice_and_delete_hides_for_one_user(tmp_path: Path) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        oops = await _send(client, "alice", "oops", "c-1")
        kept = await _send(client, "alice", "kept", "c-2")
        path = f"/conversations/si_alice_bob/messages/{oops}/revoke"
        assert (await client.post(path, json={"user_id": "alice"})).json() == {"revoked": True}
        assert (await client.post(path, json={"user_id": "alice"})).json() == {"revoked": False}
        hide = f"/conversations/si_alice_bob/messages/{kept}?user_id=bob"
        assert (await client.delete(hide)).json() == {"changed": 1}
        bob = await _entries(client, "viewer=bob&latest=20")
        alice = await _entries(client, "viewer=alice&latest=20")
        assert bob[0]["revoked_by"] == "alice" and "oops" not in bob[0]["content"]
        assert bob[1] == {"seq": kept, "tombstone": "deleted"}
        assert [e["seq"] for e in alice] == [oops, kept] and alice[1]["content"] == "kept"

    run(tmp_path, scenario)


def test_bad_input_is_a_typed_error_and_changes_nothing(tmp_path: Path) -> None:
    async def scenario(client: httpx.AsyncClient) -> None:
        await _send(client, "alice", "hi", "c-1")
        empty = {"send_id": "", "content": "x", "client_msg_id": "c-2", "recv_id": "bob"}
        response = await client.post("/conversations/si_alice_bob/messages", json=empty)
        assert response.status_code == 400 and response.json()["error"] == "InvalidMessage"
        revoke = await client.post(
            "/conversations/si_alice_bob/messages/1/revoke", json={"user_id": "bob"}
        )
        assert revoke.status_code == 403 and revoke.json()["error"] == "NotPermitted"
        latest = await _entries(client, "viewer=bob&latest=20")
        assert [(e["seq"], e["content"], "revoked_by" in e) for e in latest] == [(1, "hi", False)]

    run(tmp_path, scenario)
