"""imbucket's asyncio API (the ``[asyncio]`` extra, with the drivers of your backend's extra).

Example::

    from imbucket import Draft
    from imbucket.aio import open_service

    async with open_service({"store": {"backend": "sql-bucket", "url": "sqlite://"}}) as chat:
        hi = Draft(send_id="alice", content="hi", client_msg_id="c-1")
        sent = await chat.send("sg_team", [hi])

``AsyncMessageService`` runs the one ``MessageService`` in greenlets on asyncio drivers
(docs/asyncio.md): the same rules, arguments, results, errors and configuration.
"""

from __future__ import annotations

from imbucket.app.aio import AsyncMessageService, open_service

__all__ = ["AsyncMessageService", "open_service"]
