"""imbucket.aio: a call cancelled at any awaited statement leaves the store consistent.

An instrumented engine counts the statements a call awaits; for every k, a fresh conversation
gets the same call cancelled right at its k-th statement (the task is cancelled as the
statement is handed to the driver, so it may or may not have run: a lost reply). The call is
then repeated, and the store checked by view: each message stored once, at the seq the retry
returned, a revoke or delete shown as if the call had run once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from imbucket.aio import AsyncMessageService, open_service
from imbucket.domain.model import Actor, Draft
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.rows import store_config

Call = Callable[[AsyncMessageService, str], Awaitable[Any]]
STORES = [
    pytest.param(("sql-bucket", "sqlite"), id="sql-bucket-sqlite"),
    pytest.param(("sql-row", "sqlite"), id="sql-row-sqlite"),
    pytest.param(("sql-bucket", "postgres_url"), id="sql-bucket-postgres"),
    pytest.param(("sql-row", "postgres_url"), id="sql-row-postgres"),
    pytest.param(("sql-bucket", "mariadb_url"), id="sql-bucket-mariadb"),
]


@pytest.fixture(params=STORES)
def config(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    backend, url = request.param
    if url == "sqlite":
        return store_config(backend, f"sqlite:///{tmp_path / 'store.db'}")
    return store_config(backend, request.getfixturevalue(url))


def draft(n: int) -> Draft:
    return Draft(
        send_id="alice", content=f"hello {n}", client_msg_id=f"c-{n}", session_type=1, recv_id="bob"
    )


class CancelAt:
    """Cancels the running task at its k-th statement (counted while armed)."""

    def __init__(self, service: AsyncMessageService) -> None:
        self.engine = service.service.seqs.db.engine  # type: ignore[attr-defined]
        self.k = 0
        self.count = 0
        event.listen(self.engine, "before_cursor_execute", self._statement)

    def _statement(self, *_: Any) -> None:
        self.count += 1
        if self.count == self.k:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()

    async def statements(self, call: Awaitable[Any], k: int) -> int:
        """Run call, cancelled at its k-th statement (0: never); how many it issued."""
        self.k, self.count = k, 0
        try:
            await call
        except asyncio.CancelledError:
            assert k and self.count >= k
        finally:
            self.k = 0
        return self.count


async def cut_everywhere(service: AsyncMessageService, prepare: Call, call: Call) -> list[str]:
    """Conversations on which call ran cut at its 1st, 2nd, … statement (after prepare)."""
    cancel = CancelAt(service)
    await prepare(service, "si_uncut")
    total = await cancel.statements(call(service, "si_uncut"), 0)
    assert total >= 1  # else nothing would be cut; a fresh send on PostgreSQL sql-row is 1
    cut = []
    for k in range(1, total + 1):
        conversation = f"si_cut_{k}"
        await prepare(service, conversation)
        await cancel.statements(call(service, conversation), k)
        cut.append(conversation)
    return cut


async def nothing(_service: AsyncMessageService, _conversation: str) -> None:
    return None


async def one_sent(service: AsyncMessageService, conversation: str) -> None:
    await service.send(conversation, [draft(1)])


def test_a_send_cancelled_at_any_statement_is_stored_once_when_repeated(
    config: dict[str, Any],
) -> None:
    async def send(service: AsyncMessageService, conversation: str) -> Any:
        return await service.send(conversation, [draft(1), draft(2)])

    async def scenario() -> None:
        async with open_service(config) as service:
            for conversation in await cut_everywhere(service, nothing, send):
                sent = await send(service, conversation)
                assert await send(service, conversation) == sent  # idempotent afterwards
                top = await service.max_seq(conversation)
                seen = await service.pull_range(conversation, "bob", 1, top)
                views = [e for e in seen if isinstance(e, MessageView)]
                assert [v.message for v in views] == sent  # each message once, where returned
                # A seq the cut call had allocated but not stored is given up, or stays empty.
                assert all(
                    isinstance(e, Tombstone)
                    and e.reason in (TombstoneReason.PURGED, TombstoneReason.MISSING)
                    for e in seen
                    if not isinstance(e, MessageView)
                )

    asyncio.run(scenario())


def test_a_tag_write_cancelled_at_any_statement_applies_once_when_repeated(
    config: dict[str, Any],
) -> None:
    async def revoke_and_delete(service: AsyncMessageService, conversation: str) -> None:
        await service.revoke(conversation, 1, Actor("alice"))
        await service.delete_for_me(conversation, [1], "bob")

    async def scenario() -> None:
        async with open_service(config) as service:
            for conversation in await cut_everywhere(service, one_sent, revoke_and_delete):
                await revoke_and_delete(service, conversation)
                (bob,) = await service.pull(conversation, "bob", [1])
                (carol,) = await service.pull(conversation, "carol", [1])
                assert bob == Tombstone(1, TombstoneReason.DELETED)
                assert isinstance(carol, MessageView) and carol.revoked is not None
                assert (await service.inspect(conversation, 1)).slot is not None

    asyncio.run(scenario())
