"""A small asyncio chat service on imbucket.aio, with Starlette.

Run it with ``uvicorn chat_app:app`` (``IMBUCKET_CHAT_DB`` names the SQLite file), or build one
on any imbucket configuration with ``create_app(config)``. Endpoints:

- ``POST /conversations/{cid}/messages`` ``{"send_id", "content", "client_msg_id", ...}``:
  the message sent (once per ``client_msg_id``: a retry returns the same seq)
- ``GET /conversations/{cid}/messages?viewer=ID&latest=N`` or ``&first=A&last=B``: entries
- ``POST /conversations/{cid}/messages/{seq}/revoke`` ``{"user_id"}``: ``{"revoked": bool}``
- ``DELETE /conversations/{cid}/messages/{seq}?user_id=ID``: delete for that user only

Bad input and refused writes are imbucket's typed errors, answered as 400/403 with the
error's name.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from imbucket import Actor, Draft, ImbucketError, MessageView, NotPermitted, Tombstone
from imbucket.aio import AsyncMessageService, open_service

DRAFT_FIELDS = ("send_id", "content", "client_msg_id", "recv_id", "group_id", "session_type")


def create_app(config: Mapping[str, Any]) -> Starlette:
    """The chat service over the imbucket configuration config, opened for the app's lifespan."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_service(config) as chat:
            app.state.chat = chat
            yield

    routes = [
        Route("/conversations/{cid}/messages", send, methods=["POST"]),
        Route("/conversations/{cid}/messages", pull, methods=["GET"]),
        Route("/conversations/{cid}/messages/{seq:int}/revoke", revoke, methods=["POST"]),
        Route("/conversations/{cid}/messages/{seq:int}", delete_for_me, methods=["DELETE"]),
    ]
    handlers = {ImbucketError: refused, ValueError: malformed, KeyError: malformed}
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)


def _chat(request: Request) -> AsyncMessageService:
    chat: AsyncMessageService = request.app.state.chat
    return chat


async def send(request: Request) -> JSONResponse:
    """POST a draft: its seq (the same seq again for a retried client_msg_id)."""
    body = await request.json()
    draft = Draft(**{name: body[name] for name in DRAFT_FIELDS if name in body})
    [message] = await _chat(request).send(request.path_params["cid"], [draft])
    return JSONResponse({"seq": message.seq, "client_msg_id": message.client_msg_id})


async def pull(request: Request) -> JSONResponse:
    """GET the entries viewer sees: seqs first..last, or the newest latest (default 20)."""
    cid, query = request.path_params["cid"], request.query_params
    viewer = query["viewer"]
    if "first" in query:
        first, last = int(query["first"]), int(query["last"])
        entries = await _chat(request).pull_range(cid, viewer, first, last)
    else:
        entries = await _chat(request).pull_latest(cid, viewer, int(query.get("latest", "20")))
    return JSONResponse({"entries": [_entry(entry) for entry in entries]})


async def revoke(request: Request) -> JSONResponse:
    """POST a revoke by user_id: whether this call revoked it."""
    body = await request.json()
    cid, seq = request.path_params["cid"], request.path_params["seq"]
    revoked = await _chat(request).revoke(cid, seq, Actor(body["user_id"]))
    return JSONResponse({"revoked": revoked})


async def delete_for_me(request: Request) -> JSONResponse:
    """DELETE seq for user_id only: how many seqs changed (0 when already deleted)."""
    cid, seq = request.path_params["cid"], request.path_params["seq"]
    changed = await _chat(request).delete_for_me(cid, [seq], request.query_params["user_id"])
    return JSONResponse({"changed": changed})


def _entry(entry: MessageView | Tombstone) -> dict[str, Any]:
    if isinstance(entry, Tombstone):
        return {"seq": entry.seq, "tombstone": str(entry.reason)}
    message = entry.message
    view = {"seq": entry.seq, "send_id": message.send_id, "content": message.content}
    if entry.revoked is not None:
        view["revoked_by"] = entry.revoked.user_id
    return view


async def refused(request: Request, error: Exception) -> JSONResponse:
    """An ImbucketError: 403 for a refused permission, else 400."""
    status = 403 if isinstance(error, NotPermitted) else 400
    return JSONResponse({"error": type(error).__name__, "detail": str(error)}, status)


async def malformed(request: Request, error: Exception) -> JSONResponse:
    """A body or query missing a field or holding a non-number: 400."""
    return JSONResponse({"error": "MalformedRequest", "detail": repr(error)}, 400)


app = create_app(
    {
        "store": {
            "backend": "sql-bucket",
            "url": f"sqlite:///{os.environ.get('IMBUCKET_CHAT_DB', 'chat.db')}",
        }
    }
)
