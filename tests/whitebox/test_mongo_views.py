"""The Mongo backends' fused pull reads: one aggregate per pull, the same answers as two reads.

``service.views`` (``adapters.mongo.views``) must equal ``app.views.SeparateViews`` (the
watermarks, then the store's viewer-scoped get) on every case a pull meets, and cost one
round trip per pull kind, also when a slot read has spilled deleters (the aggregate looks
up the viewer's own side-table entry). Counts, never times.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from imbucket.adapters.mongo.views import MongoBucketViews, MongoRowViews
from imbucket.app import MessageService
from imbucket.app.cache_binding import attach
from imbucket.app.views import SeparateViews
from imbucket.bench.instrument.probe import Probe
from imbucket.domain.model import MAX_SEQ, Actor, Pick, Role, Watermarks
from imbucket.domain.projection import Tombstone, TombstoneReason
from imbucket.testing.factories import CONV, messages
from imbucket.testing.rows import Config
from tests.contract.conftest import spilling

OWNER = Actor("olivia", Role.OWNER)
VIEWERS = ("bob", "carol", "dave", "erin")
SIZE = 100  # the rows' bucket size: seqs 100 and 101 sit in two buckets

MONGO_ROWS = [
    pytest.param("mongo_bucket_config", id="mongo-bucket"),
    pytest.param("mongo_row_config", id="mongo-row"),
    pytest.param("mongo_bucket_spill_config", id="mongo-bucket-spill"),
]
pytestmark = pytest.mark.parametrize("backend_config", MONGO_ROWS, indirect=True)

# Listed seqs: below, at and above a bucket boundary, allocated but empty, unallocated.
SEQ_PICKS = [
    (1, 2, 3),
    (5, 6, 7, 8, 9),
    (99, 100, 101, 102),
    (150, 151, 155, 160, 161, 10**6),
    tuple(range(90, 131)),
    (MAX_SEQ, 7, 7, 3),
]
# Latest counts: one, below, across a bucket boundary, exactly max_seq, above it.
LATEST_PICKS = (1, 20, 61, 160, 1000)
PICKS = [Pick(seqs=s) for s in SEQ_PICKS] + [Pick(latest=n) for n in LATEST_PICKS]


@pytest.fixture
def mongo_bucket_spill_config(mongo_bucket_config: Config) -> Config:
    """mongo-bucket with one deleter inline per slot: every further one spills."""
    return spilling(mongo_bucket_config)


def assert_same_views(service: MessageService, conversation_id: str = CONV) -> None:
    """The fused views equal the separate reads for every viewer and pick."""
    separate = SeparateViews(service.store, service.seqs)
    for viewer in VIEWERS:
        for pick in PICKS:
            fused = service.views.view(conversation_id, viewer, pick)
            assert fused == separate.view(conversation_id, viewer, pick), (viewer, pick)


def tag(service: MessageService) -> None:
    """Every kind of tag on seqs of the first two buckets."""
    service.revoke(CONV, 3, Actor("alice"))
    service.delete_for_me(CONV, [5, 100], "bob")
    service.delete_for_me(CONV, [6, 101], "carol")
    for user in ("bob", "carol", "dave"):  # seq 7: three deleters (two spill on the spill row)
        service.delete_for_me(CONV, [7], user)
    service.mark_read(CONV, [8], "bob")
    service.purge(CONV, [9, 102], OWNER)


def test_the_service_reads_through_the_fused_views(service: MessageService) -> None:
    assert isinstance(service.views, MongoBucketViews | MongoRowViews)


def test_an_empty_conversation_has_no_marks_and_no_slots(service: MessageService) -> None:
    for pick in PICKS:
        assert service.views.view("nobody_here", "bob", pick) == (Watermarks(), {})
    service.clear_history("only_user_seqs", "bob")  # the user's document, no counter
    assert_same_views(service, "only_user_seqs")


def test_fused_views_equal_separate_reads_on_every_case(service: MessageService) -> None:
    service.ingest(CONV, messages(1, 150))
    service.seqs.raise_max_seq(CONV, 160)  # 151..160 allocated, never stored
    assert_same_views(service)
    tag(service)
    assert_same_views(service)
    service.clear_history(CONV, "carol")  # carol's floor above max_seq: she sees nothing
    assert_same_views(service)
    service.ingest(CONV, messages(161, 230))
    service.seqs.raise_min_seq(CONV, 120)  # cleared for everyone up to 119
    assert_same_views(service)
    service.clear_for_everyone(CONV, OWNER)
    assert_same_views(service)


def test_seqs_beyond_2_to_the_53_address_their_buckets_exactly(service: MessageService) -> None:
    conversation = "sg_far"
    service.ingest(conversation, messages(MAX_SEQ - 1, MAX_SEQ, conversation))
    service.delete_for_me(conversation, [MAX_SEQ], "dave")
    for viewer in VIEWERS:
        for pick in (Pick(latest=2), Pick(seqs=(MAX_SEQ - 1, MAX_SEQ)), Pick(latest=300)):
            marks, slots = service.views.view(conversation, viewer, pick)
            assert sorted(slots) == [MAX_SEQ - 1, MAX_SEQ]
            assert (marks, slots) == SeparateViews(service.store, service.seqs).view(
                conversation, viewer, pick
            )


def test_behind_the_redis_cache_pulls_answer_what_the_store_answers(
    service: MessageService,
    open_backend: Callable[..., MessageService],
    backend_config: Config,
    redis_cache: Config,
) -> None:
    """A cache miss is answered by the fused aggregate; cold and warm pulls agree with it.

    The store is written uncached, then bound to the cache (``imbucket cache attach``), so
    that the service opened uncached before only reads afterwards.
    """
    service.ingest(CONV, messages(1, 150))
    tag(service)
    attach({**backend_config, "cache": redis_cache})
    cached = open_backend(cache=redis_cache)
    for _ in range(2):  # cold, then from the cache
        for viewer in VIEWERS:
            for count in (20, 61):
                pulled = cached.pull_latest(CONV, viewer, count)
                assert pulled == service.pull_latest(CONV, viewer, count)
            seqs = [3, 5, 7, 9, 99, 100, 101, 155]
            assert cached.pull(CONV, viewer, seqs) == service.pull(CONV, viewer, seqs)


# ---- round trips -------------------------------------------------------------------------

PULLS: dict[str, Callable[[MessageService, str], object]] = {
    "pull_latest(20)": lambda service, viewer: service.pull_latest(CONV, viewer, 20),
    "pull_range(91..110)": lambda service, viewer: service.pull_range(CONV, viewer, 91, 110),
    "pull(5 seqs)": lambda service, viewer: service.pull(CONV, viewer, [7, 50, 99, 101, 130]),
    # As many documents as the reply's first batch can hold: the marks, then 100 rows.
    "pull_range(1..100)": lambda service, viewer: service.pull_range(CONV, viewer, 1, 100),
    "pull_latest(100)": lambda service, viewer: service.pull_latest(CONV, viewer, 100),
}


@pytest.mark.parametrize("pull", PULLS.values(), ids=PULLS.keys())
def test_every_pull_is_one_aggregate(
    probed: tuple[Probe, MessageService], pull: Callable[[MessageService, str], object]
) -> None:
    probe, service = probed
    service.ingest(CONV, messages(1, 110))
    count = probe.count(lambda: pull(service, "bob"))
    assert count.total == 1, count
    assert count.writes == 0, count


@pytest.mark.parametrize("pull", PULLS.values(), ids=PULLS.keys())
def test_a_spilled_slot_costs_no_second_read(
    probed: tuple[Probe, MessageService], pull: Callable[[MessageService, str], object]
) -> None:
    """Seq 7 (and 101) deleted by carol, then dave: on the spill row dave's entry spilled.

    The aggregate looks up the viewer's own side-table entry in every flagged slot, so erin
    (no entry), dave (spilled) and carol (inline) all pay one round trip, and see it right.
    """
    probe, service = probed
    service.ingest(CONV, messages(1, 110))
    for user in ("carol", "dave"):
        service.delete_for_me(CONV, [7, 101], user)
    for viewer in ("carol", "dave", "erin"):
        count = probe.count(lambda viewer=viewer: pull(service, viewer))
        assert count.total == 1, (viewer, count)
    (mine,) = service.pull(CONV, "dave", [7])
    (theirs,) = service.pull(CONV, "erin", [7])
    assert isinstance(mine, Tombstone) and mine.reason == TombstoneReason.DELETED
    assert not isinstance(theirs, Tombstone)
