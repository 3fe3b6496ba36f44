"""The data ``imbucket migrate-matrix`` moves: the demo scenario and the bench small dataset.

``fill_demo`` plays ``make demo``'s conversation (a clear, a delete-for-me, a revoke, a gap, a
purge). ``fill_small`` ingests the benchmark's small dataset (100,446 messages in 3,025
conversations, seed 42) in its consumer batches, then adds every kind of state a migration
must carry: 600 deleters of one hot message (they spill in a bucket store), 200 revokes,
read flags and read seqs, per-user and conversation-wide clears, two purges, and send
claims. Both go through the service, as live traffic would; both are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

from imbucket.app.demo import play
from imbucket.app.service import MessageService
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.domain.model import Actor, Draft, Role

HOT_DELETERS = 600
REVOKES = 200
READS = 300
CLEARS = 100
SENDS = 100
OWNER = Actor("migrate-owner", Role.OWNER)


def fill_demo(service: MessageService) -> None:
    """The demo scenario (``imbucket demo``)."""
    play(service)


def fill_small(service: MessageService, seed: int = 42) -> None:
    """The bench small dataset and its tags, watermarks and claims (see the module doc)."""
    dataset = Dataset(SCALES["small"], seed)
    for batch in dataset.batches():
        service.ingest(batch.conversation.id, dataset.messages_of(batch))
    hot = dataset.largest
    for n in range(HOT_DELETERS):
        service.delete_for_me(hot.id, [1], f"hot-deleter-{n:04d}")
    conversations = sorted((c for c in dataset.conversations if c != hot), key=lambda c: c.id)
    for conv in conversations[:REVOKES]:
        sender = dataset.sender(conv, 1)
        service.revoke(conv.id, 1, Actor(sender), nickname=f"User {sender[1:]}")
    for conv in conversations[REVOKES : REVOKES + READS]:
        reader = conv.members[-1]
        service.mark_read(conv.id, list(range(1, min(conv.size, 10) + 1)), reader)
    for conv in conversations[-CLEARS:]:
        service.clear_history(conv.id, conv.members[0])
    service.clear_for_everyone(conversations[-1].id, OWNER)
    service.purge(hot.id, [2, 3], OWNER)
    service.purge(conversations[0].id, [1], OWNER)
    for n, conv in enumerate(conversations[:SENDS]):
        draft = Draft(send_id=conv.members[0], content=f"sent {n}", client_msg_id=f"send-{n:04d}")
        service.send(conv.id, [_shaped(draft, conv.is_group, conv.id, conv.members)])


def _shaped(draft: Draft, group: bool, conversation_id: str, members: tuple[str, ...]) -> Draft:
    """The draft addressed like the conversation's own messages (group or 1:1)."""
    from dataclasses import replace

    from imbucket.domain.model import SessionType

    if group:
        return replace(draft, group_id=conversation_id[3:], session_type=SessionType.GROUP)
    other = next(m for m in members if m != draft.send_id)
    return replace(draft, recv_id=other, session_type=SessionType.SINGLE)


DATASETS: dict[str, Callable[[MessageService], None]] = {
    "demo": fill_demo,
    "small": fill_small,
}
