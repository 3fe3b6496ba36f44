"""The asyncio API: every use case of MessageService as a coroutine, on asyncio drivers.

There is one implementation of the rules. ``AsyncMessageService`` holds an ordinary
``MessageService`` whose backends were opened with asyncio drivers (SQLAlchemy's asyncio
engines: aiosqlite, psycopg's asyncio mode, aiomysql) and runs each use case inside a greenlet
(``sqlalchemy.util.greenlet_spawn``), the way SQLAlchemy's own asyncio extension runs its ORM:
the validation, the state machines, the command builders and the projection run unchanged,
and each statement they issue is awaited on the event loop (``adapters/asyncio_bridge.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from imbucket.adapters.extras import needs_extra
from imbucket.app.registry import CACHES, REGISTRY
from imbucket.app.service import Location, MessageService
from imbucket.app.settings import Settings, load_settings
from imbucket.domain.errors import ConfigError
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    Actor,
    Draft,
    InsertResult,
    Message,
    Role,
    StoreStats,
)
from imbucket.domain.projection import Entry
from imbucket.ports.health import Health

P = ParamSpec("P")
R = TypeVar("R")


class AsyncMessageService:
    """MessageService's use cases as coroutines; the same arguments, results and errors.

    Concurrent calls share the store's connection pool (``store.pool_size`` +
    ``store.max_overflow``). A call that is cancelled stops at the statement it was waiting
    for; what it had written is kept as after a lost reply, and the same call repeated
    converges (``send`` per ``client_msg_id``, tag writes as set-adds). Use it as
    ``async with open_service(config) as service:`` or close it with ``aclose``.
    """

    def __init__(self, service: MessageService) -> None:
        self.service = service  # the one implementation; its store is the same objects

    @property
    def layout(self) -> BucketLayout:
        """The bucket layout of the underlying store."""
        return self.service.layout

    async def run(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """work(*args, **kwargs) in a greenlet whose driver calls wait on this event loop.

        For code that needs the store objects themselves (``service.store``, ``service.seqs``).
        """
        from sqlalchemy.util import greenlet_spawn

        return await greenlet_spawn(functools.partial(work, *args, **kwargs))

    async def send(self, conversation_id: str, drafts: Sequence[Draft]) -> list[Message]:
        """MessageService.send: new messages, once per (conversation_id, client_msg_id)."""
        return await self.run(self.service.send, conversation_id, drafts)

    async def ingest(self, conversation_id: str, messages: Sequence[Message]) -> InsertResult:
        """MessageService.ingest: messages whose seqs are set, idempotently."""
        return await self.run(self.service.ingest, conversation_id, messages)

    async def pull(self, conversation_id: str, viewer_id: str, seqs: Sequence[int]) -> list[Entry]:
        """MessageService.pull: one entry per requested seq, as viewer_id sees it."""
        return await self.run(self.service.pull, conversation_id, viewer_id, seqs)

    async def pull_range(
        self, conversation_id: str, viewer_id: str, first: int, last: int
    ) -> list[Entry]:
        """MessageService.pull_range: seqs first..last inclusive, ascending."""
        return await self.run(self.service.pull_range, conversation_id, viewer_id, first, last)

    async def pull_latest(
        self, conversation_id: str, viewer_id: str, count: int = 20
    ) -> list[Entry]:
        """MessageService.pull_latest: the newest count seqs the viewer has not cleared."""
        return await self.run(self.service.pull_latest, conversation_id, viewer_id, count)

    async def revoke(
        self,
        conversation_id: str,
        seq: int,
        actor: Actor,
        *,
        sender_role: Role = Role.MEMBER,
        nickname: str = "",
    ) -> bool:
        """MessageService.revoke: False when seq was revoked (or purged) already."""
        revoke = self.service.revoke
        return await self.run(
            revoke, conversation_id, seq, actor, sender_role=sender_role, nickname=nickname
        )

    async def delete_for_me(self, conversation_id: str, seqs: Sequence[int], user_id: str) -> int:
        """MessageService.delete_for_me: how many seqs changed."""
        return await self.run(self.service.delete_for_me, conversation_id, seqs, user_id)

    async def clear_history(self, conversation_id: str, user_id: str) -> int:
        """MessageService.clear_history: the new floor."""
        return await self.run(self.service.clear_history, conversation_id, user_id)

    async def clear_for_everyone(self, conversation_id: str, actor: Actor) -> int:
        """MessageService.clear_for_everyone: the new floor."""
        return await self.run(self.service.clear_for_everyone, conversation_id, actor)

    async def purge(self, conversation_id: str, seqs: Sequence[int], actor: Actor) -> int:
        """MessageService.purge: how many seqs were purged."""
        return await self.run(self.service.purge, conversation_id, seqs, actor)

    async def mark_read(self, conversation_id: str, seqs: Sequence[int], reader_id: str) -> int:
        """MessageService.mark_read: how many seqs changed."""
        return await self.run(self.service.mark_read, conversation_id, seqs, reader_id)

    async def max_seq(self, conversation_id: str) -> int:
        """MessageService.max_seq: the highest allocated seq (0 if none)."""
        return await self.run(self.service.max_seq, conversation_id)

    async def inspect(self, conversation_id: str, seq: int) -> Location:
        """MessageService.inspect: where seq lives and its raw slot."""
        return await self.run(self.service.inspect, conversation_id, seq)

    async def stats(self) -> StoreStats:
        """MessageService.stats: the storage footprint."""
        return await self.run(self.service.stats)

    async def health(self) -> Health:
        """MessageService.health: the store's and the cache's reachability, now."""
        return await self.run(self.service.health)

    async def prune_send_claims(self) -> int:
        """MessageService.prune_send_claims: how many expired send claims went."""
        return await self.run(self.service.prune_send_claims)

    async def aclose(self) -> None:
        """Close the store's connections."""
        await self.run(self.service.close)

    async def __aenter__(self) -> AsyncMessageService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class Opening:
    """An AsyncMessageService being opened: ``await`` it, or use it as ``async with``."""

    def __init__(self, config: Mapping[str, Any] | None) -> None:
        self._config = config
        self._service: AsyncMessageService | None = None

    def __await__(self) -> Generator[Any, None, AsyncMessageService]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMessageService:
        self._service = await self._open()
        return self._service

    async def __aexit__(self, *exc_info: object) -> None:
        if self._service is not None:
            await self._service.aclose()

    async def _open(self) -> AsyncMessageService:
        with needs_extra("imbucket.aio"):
            import greenlet  # noqa: F401 - SQLAlchemy's asyncio support needs it
            from sqlalchemy.util import greenlet_spawn

        settings = load_settings(self._config)
        check_asynchronous(settings)
        service = await greenlet_spawn(_open_service, settings)
        return AsyncMessageService(service)


def open_service(config: Mapping[str, Any] | None = None) -> Opening:
    """An AsyncMessageService from config, read as ``imbucket.open_service`` reads it.

    ``service = await open_service(config)`` or ``async with open_service(config) as service``.
    """
    return Opening(config)


def check_asynchronous(settings: Settings) -> None:
    """ConfigError for a configuration whose drivers have no asyncio mode here.

    Each registration says whether it has one (``BackendRules.asyncio``, ``CacheRules.asyncio``).
    """
    store, cache = settings.store.backend, settings.cache.backend
    for kind, name, asyncio in (
        ("store", store, REGISTRY.get(store).rules.asyncio),
        ("cache", cache, CACHES.get(cache).rules.asyncio),
    ):
        if not asyncio:
            raise ConfigError(
                f"imbucket.aio has no asyncio driver for {kind} backend {name!r} yet: use "
                "imbucket.open_service from a thread"
            )


def _open_service(settings: Settings) -> MessageService:
    """The container's MessageService, its backends opened with asyncio drivers."""
    from dependency_injector import providers

    from imbucket.app.container import Container

    container = Container(settings=providers.Object(settings), asynchronous=providers.Object(True))
    service: MessageService = container.service()
    return service
