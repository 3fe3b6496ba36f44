"""A Redis Cluster master SIGKILLed while readers and writers run: no wrong answer, ever.

The test starts a cluster of its own (3 masters, 3 replicas), spreads conversations over its
three masters, and runs one writer thread per pair of conversations and two reader threads,
each with a cache (and a cluster client) of its own, like separate processes. It then kills
the master of two of the conversations and keeps going until a replica has taken over, and
for a while after.

Each service is wired as the container wires a cached backend, the store's invalidation log
included (``backends.cached``): what a writer's cache refuses goes through the log. Every
answer is checked against the store's truth and the documented bound (docs/redis.md,
"Staleness and its bound"):

- a writer pulls its own conversations after each write, and must see exactly what an
  uncached service reads from the store;
- each entry of a reader's pull must equal that seq's entry in a state the conversation had
  after the last write that had completed ``STALENESS`` seconds before the pull started (or
  in a later state): never an older one. During the failover a writer's client may still
  route a conversation to the dead master while readers already fill it on the promoted
  replica; its invalidation then reaches them through the log, within that bound. (Entries,
  not whole pulls: a pull reads its seqs at slightly different moments, from the cache and
  from the store, while writes go on.)

Afterwards the cache must serve again (a pull with no store read) on the promoted replica.
Counts are asserted, never times; the numbers are printed for the report.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from redis.cluster import key_slot

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.memory import (
    MemoryBucketRepository,
    MemoryInvalidationLog,
    MemorySeqStore,
)
from imbucket.adapters.redis_cache import RedisMessageCache
from imbucket.app import MessageService
from imbucket.app.backends import Backend, cached
from imbucket.domain.model import Actor
from imbucket.domain.projection import Entry
from imbucket.ports.message_store import MessageStore
from imbucket.testing.factories import messages
from tests.cache.cases import CONV, MUTATIONS, seed
from tests.cache.conftest import NOW_MS, Rig, SpyStore, Target
from tests.redis_cluster import (
    FAST_NODE_TIMEOUT_MS,
    ClusterNode,
    RedisClusterProcesses,
    start_cluster,
)

VIEWER = "bob"
WHOLE = 1000  # pull_latest count: every seq (a conversation gets under MAX_OPS / 2 writes)
WRITERS = 3  # each owns two conversations, on two different masters
READERS = 2
OPS_BEFORE = 40  # per writer, before the kill
OPS_AFTER = 40  # per writer, after the replica took over
MAX_OPS = 5000  # per thread, whatever happens
JOIN_SECONDS = 60.0
STALENESS = 0.5  # cache.staleness_seconds of every service: the bound a reader is held to


class CountingCache(RedisMessageCache):
    """A cache that counts the Redis calls that failed (each one fell back to the store)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failures = 0

    def _failed(self, error: Exception, scope: str) -> None:
        self.failures += 1
        super()._failed(error, scope)


@dataclass
class History:
    """Per conversation, the truth after each completed write (index 0: after seeding), and
    when each write had completed (``time.monotonic``)."""

    states: dict[str, list[list[Entry]]] = field(default_factory=dict)
    completed_at: dict[str, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, conversation_id: str, state: list[Entry], completed_at: float) -> None:
        with self.lock:
            self.states.setdefault(conversation_id, []).append(state)
            self.completed_at.setdefault(conversation_id, []).append(completed_at)

    def settled(self, conversation_id: str, started: float) -> int:
        """How many states had completed STALENESS seconds before started (at least 1)."""
        with self.lock:
            times = self.completed_at[conversation_id]
            return max(1, bisect.bisect_right(times, started - STALENESS))

    def completed(self, conversation_id: str) -> int:
        with self.lock:
            return len(self.states[conversation_id])


@dataclass
class Load:
    """The store, its truth service, the cluster, and what the threads saw."""

    cluster: RedisClusterProcesses
    store: MessageStore
    spy: SpyStore
    seqs: MemorySeqStore
    truth: MessageService
    history: History = field(default_factory=History)
    caches: list[CountingCache] = field(default_factory=list)
    services: list[MessageService] = field(default_factory=list)
    reads: list[tuple[str, int, int, list[Entry]]] = field(default_factory=list)
    log: MemoryInvalidationLog = field(default_factory=MemoryInvalidationLog)
    ops: Counter[str] = field(default_factory=Counter)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    phase: str = "before"

    def service(self) -> MessageService:
        """A cached service with a cluster client of its own (like another process)."""
        cache = CountingCache.from_url(self.cluster.url, cluster=True, key_prefix="failover")
        self.caches.append(cache)
        backend = cached(Backend(self.spy, self.seqs, invalidation_log=self.log), cache, STALENESS)
        service = MessageService(
            backend.store, backend.seqs, views=backend.views, clock=lambda: NOW_MS
        )
        self.services.append(service)
        return service


@pytest.fixture
def target(redis_cluster: RedisClusterProcesses) -> Target:
    """The white-box tests of this module run on the session's cluster."""
    return Target(redis_cluster.url, cluster=True)


@pytest.fixture
def own_cluster() -> Iterator[RedisClusterProcesses]:
    """A cluster for this test alone: it kills one of its masters."""
    cluster = start_cluster(FAST_NODE_TIMEOUT_MS)
    yield cluster
    cluster.stop()


@pytest.fixture
def load(own_cluster: RedisClusterProcesses) -> Iterator[Load]:
    store = BucketMessageStore(MemoryBucketRepository())
    seqs = MemorySeqStore()
    load = Load(own_cluster, store, SpyStore(store), seqs, MessageService(store, seqs))
    yield load
    for cache in load.caches:
        cache.close()


def conversations(cluster: RedisClusterProcesses) -> dict[int, list[str]]:
    """Two group conversations per master, by master port."""
    by_master: dict[int, list[str]] = {}
    for i in range(300):
        conversation_id = f"sg_failover_{i}"
        port = cluster.master_of(key_slot(conversation_id.encode())).port
        group = by_master.setdefault(port, [])
        if len(group) < 2:
            group.append(conversation_id)
        if len(by_master) == 3 and all(len(g) == 2 for g in by_master.values()):
            return by_master
    raise AssertionError("300 conversation ids did not cover three masters twice")


def write(service: MessageService, conversation_id: str, step: int) -> None:
    """The step-th write of a conversation: a new message, or a tag on an earlier one."""
    seq = service.max_seq(conversation_id)
    kind = step % 4
    if kind == 0 or seq < 3:
        service.ingest(conversation_id, messages(seq + 1, seq + 1, conversation_id))
    elif kind == 1:
        service.revoke(conversation_id, seq - 1, Actor("alice"))
    elif kind == 2:
        service.delete_for_me(conversation_id, [seq - 2], VIEWER)
    else:
        service.mark_read(conversation_id, [seq], VIEWER)


def writer(load: Load, owned: list[str]) -> None:
    """Write each owned conversation in turn; after each write, its pull must be the truth."""
    service = load.service()
    for step in range(MAX_OPS):
        if load.stop.is_set():
            return
        conversation_id = owned[step % len(owned)]
        write(service, conversation_id, step)
        completed = time.monotonic()
        truth = load.truth.pull_latest(conversation_id, VIEWER, WHOLE)
        load.history.add(conversation_id, truth, completed)
        assert service.pull_latest(conversation_id, VIEWER, WHOLE) == truth, "a writer read stale"
        load.ops[f"writes {load.phase}"] += 1


def reader(load: Load, watched: list[str]) -> None:
    """Pull every conversation in turn; note which writes had completed before each pull."""
    service = load.service()
    for step in range(MAX_OPS):
        if load.stop.is_set():
            return
        conversation_id = watched[step % len(watched)]
        before = load.history.settled(conversation_id, time.monotonic())
        seen = service.pull_latest(conversation_id, VIEWER, WHOLE)
        after = load.history.completed(conversation_id)
        load.reads.append((conversation_id, before, after, seen))
        load.ops[f"reads {load.phase}"] += 1


def current(entry: Entry, states: list[list[Entry]]) -> bool:
    """entry is what its seq showed in one of states."""
    return any(entry in state for state in states)


def guarded(load: Load, target: Any, *args: Any) -> threading.Thread:
    def run() -> None:
        try:
            target(load, *args)
        except BaseException as error:
            load.errors.append(error)
            load.stop.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_for_writes(load: Load, count: int, phase: str) -> None:
    """Until the writers did count more writes in phase (bounded by MAX_OPS and 60 s)."""
    deadline = time.monotonic() + 60
    while load.ops[f"writes {phase}"] < count and time.monotonic() < deadline:
        assert not load.stop.is_set(), load.errors
        time.sleep(0.05)
    assert load.ops[f"writes {phase}"] >= count, f"the writers stalled in phase {phase}"


def cache_serves(load: Load, service: MessageService, conversation_id: str) -> int:
    """Pulls until one is served without reading the store; how many it took (0: never).

    Bounded: 20 pulls, 0.2 s apart (a cache that just failed waits 1 s before trying again).
    """
    truth = load.truth.pull_latest(conversation_id, VIEWER, WHOLE)
    for attempt in range(1, 21):
        before = len(load.spy.reads)
        assert service.pull_latest(conversation_id, VIEWER, WHOLE) == truth
        if len(load.spy.reads) == before:
            return attempt
        time.sleep(0.2)
    return 0


def test_killing_a_master_under_load_gives_no_wrong_answer_and_the_cache_serves_again(
    load: Load,
) -> None:
    by_master = conversations(load.cluster)
    victim_port, doomed = next(iter(by_master.items()))
    victim: ClusterNode = load.cluster.node_of(victim_port)
    everything = [c for group in by_master.values() for c in group]
    for conversation_id in everything:
        load.truth.ingest(conversation_id, messages(1, 5, conversation_id))
        seeded = load.truth.pull_latest(conversation_id, VIEWER, WHOLE)
        load.history.add(conversation_id, seeded, time.monotonic())

    # Writer i owns one conversation of master i and one of master i+1.
    groups = list(by_master.values())
    owned = [[groups[i][0], groups[(i + 1) % 3][1]] for i in range(WRITERS)]
    threads = [guarded(load, writer, conversations_) for conversations_ in owned]
    threads += [guarded(load, reader, everything) for _ in range(READERS)]

    wait_for_writes(load, OPS_BEFORE * WRITERS, "before")
    load.phase = "failover"
    killed_at = time.monotonic()
    load.cluster.kill(victim)
    promoted_after = load.cluster.wait_ok(replicas=2, timeout=60)
    load.phase = "after"
    wait_for_writes(load, OPS_AFTER * WRITERS, "after")
    load.stop.set()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    assert not any(thread.is_alive() for thread in threads)
    assert load.errors == []

    stale = [
        (conversation_id, entry)
        for conversation_id, before, after, seen in load.reads
        for entry in seen
        if not current(entry, load.history.states[conversation_id][before - 1 : after + 1])
    ]
    assert stale == []
    fallbacks = sum(cache.failures for cache in load.caches)
    assert fallbacks > 0  # the kill was felt: some calls failed over to the store

    # The promoted replica serves the doomed conversations from the cache again, to every
    # service that lived through the failover and to a new one.
    assert load.cluster.master_of(key_slot(doomed[0].encode())).port != victim_port
    services = [*load.services, load.service()]
    pulls = {(i, c): cache_serves(load, s, c) for i, s in enumerate(services) for c in doomed}
    assert 0 not in pulls.values(), pulls

    print(
        f"\nfailover: {dict(load.ops)}; reads checked {len(load.reads)}; "
        f"fallbacks (failed Redis calls) {fallbacks}; replica promoted and cluster ok "
        f"{promoted_after:.2f} s after the kill (observed, {time.monotonic() - killed_at:.2f} s "
        f"to the end of the run); pulls until served by the cache again: {pulls}"
    )


BEFORE = {
    # written by the master a failover replaced: what the promoted replica inherited
    "another master": lambda replid, epoch: (b"0" * len(replid), epoch),
    # written before a failover elsewhere, while the cluster refused every command
    "an earlier epoch": lambda replid, epoch: (replid, str(int(epoch) - 1).encode()),
}


def restamp(rig: Rig, key: str, before: str) -> None:
    """Make key look written before a failover (stamp "<replid>/<epoch>|")."""
    value = rig.raw.get(key)
    assert value is not None
    stamp, rest = value.split(b"|", 1)
    replid, epoch = BEFORE[before](*stamp.split(b"/"))
    rig.raw.set(key, replid + b"/" + epoch + b"|" + rest)


@pytest.mark.parametrize("before", list(BEFORE))
@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.name)
def test_what_was_written_before_a_failover_is_never_served_and_its_ticket_fills_nothing(
    mutation: Any, before: str, rig: Rig
) -> None:
    """The state a master may hold after a failover: old slots, an old generation, and lost
    invalidations (lost with the old master, or refused while the cluster was down).

    The mutation reaches the store but not Redis; a lookup ticket from before the failover
    tries to fill the old slot afterwards.
    """
    seed(rig.service)
    rig.service.pull_latest(CONV, "bob")  # cached, stamped by the current master
    # As bob's pull would: a slot with deleters is filled with bob's mark next to it.
    ticket = rig.cache.get_many(CONV, [mutation.seq], "bob").ticket
    assert ticket is not None
    old = rig.spy.store.get(CONV, [mutation.seq], "bob")
    for key in (rig.cache.generation_key(CONV), rig.cache.slot_key(CONV, mutation.seq)):
        if rig.raw.exists(key):
            restamp(rig, key, before)
    # The ticket a reader took on the old master: the generation Redis holds now.
    ticket = replace(ticket, generation=rig.raw.get(rig.cache.generation_key(CONV)))
    uncached = MessageService(rig.spy.store, rig.service.seqs, clock=lambda: NOW_MS)
    mutation.apply(uncached)  # no invalidation reaches Redis

    rig.cache.put_many(CONV, old, ticket, "bob")  # the ticket of the old master fills nothing
    assert rig.cache.get_many(CONV, [mutation.seq], "bob").slots == {}
    assert mutation.shows(rig.service.pull(CONV, "bob", [mutation.seq])[0])
    rig.spy.reads.clear()
    assert mutation.shows(rig.service.pull(CONV, "bob", [mutation.seq])[0])
    assert rig.spy.reads == []  # the new master's own fill serves again
