"""A pull's reads: the backend's ViewReads answers exactly as watermarks-then-slots does.

``service.views`` is the backend's fused read (one round trip on SQL) or ``SeparateViews``;
either way it must equal ``SeparateViews`` over the same store and seq store, for every
kind of pick and every state a slot can be in.
"""

from __future__ import annotations

from imbucket.app import MessageService
from imbucket.app.views import SeparateViews
from imbucket.domain.model import Actor, Pick, Role
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import EARLY_TAGS, needs

OWNER = Actor("olivia", Role.OWNER)
VIEWERS = ("bob", "carol", "dave", "stranger")
LAST = 130  # messages 1..130: two buckets of OpenIM's 100
ALLOCATED = 135  # 131..135 allocated, never stored
LISTED = (1, 5, 6, 9, 10, 11, 12, 13, 20, 50, 100, 101, 130, 131, 133, 135, 136, 500)
LATEST = (1, 20, 30, 35, 40, ALLOCATED, ALLOCATED + 1, 200)


def assert_same_views(
    service: MessageService, conversation_id: str, picks: list[Pick], viewers: tuple[str, ...]
) -> None:
    """service.views equals SeparateViews for every viewer and pick."""
    separate = SeparateViews(service.store, service.seqs)
    for viewer in viewers:
        for pick in picks:
            fused = service.views.view(conversation_id, viewer, pick)
            assert fused == separate.view(conversation_id, viewer, pick), (viewer, pick)


def picks(listed: tuple[int, ...], latest: tuple[int, ...]) -> list[Pick]:
    """Listed seqs (scattered, sparse: about one per bucket, ranges), then latest counts."""
    ranges = [tuple(range(1, 101)), tuple(range(91, 111)), tuple(range(125, 140))]
    sparse = [(listed[0], listed[-1]), *((seq, seq + 100, seq + 300) for seq in listed)]
    return [Pick(seqs=seqs) for seqs in (listed, *sparse, *ranges)] + [
        Pick(latest=count) for count in latest
    ]


@needs(EARLY_TAGS)
def test_views_equal_separate_reads_in_every_slot_state(service: MessageService) -> None:
    service.ingest(CONV, messages(1, LAST))
    service.seqs.raise_max_seq(CONV, ALLOCATED)
    service.revoke(CONV, 5, OWNER)
    service.purge(CONV, [6], OWNER)
    service.delete_for_me(CONV, [9, 10], "bob")  # by the viewer
    service.delete_for_me(CONV, [10, 11, 101], "carol")  # by another
    # More deleters than a spill row keeps inline: bob spilled on 12, absent on 13.
    for user in ("d1", "d2", "bob"):
        service.delete_for_me(CONV, [12], user)
    for user in ("d1", "d2", "d3"):
        service.delete_for_me(CONV, [13], user)
    service.mark_read(CONV, [20, 133], "carol")  # 133: a reader before any message
    service.clear_history(CONV, "dave")  # dave sees nothing up to ALLOCATED
    service.ingest(CONV, messages(ALLOCATED + 1, ALLOCATED + 1))
    assert_same_views(service, CONV, picks(LISTED, LATEST), VIEWERS)


def test_views_equal_separate_reads_after_clear_for_everyone(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 95))
    service.clear_for_everyone(CONV, OWNER)  # the floor is 96 for everyone
    service.ingest(CONV, messages(96, 110))
    service.delete_for_me(CONV, [99, 105], "bob")
    latest = (1, 10, 15, 16, 20, 110, 111)
    assert_same_views(service, CONV, picks((1, 50, 95, 96, 99, 105, 110, 111), latest), VIEWERS)


def test_views_of_an_empty_conversation(service: MessageService) -> None:
    assert_same_views(service, "sg_views_empty", picks((1, 2, 100), (1, 20, 200)), ("bob",))
    assert service.views.view("sg_views_empty", "bob", Pick(latest=20))[1] == {}
