"""RedisMessageCache: raw slots per seq in Redis, guarded against stale fills, outage-tolerant.

Keys (the braces are a Redis Cluster hash tag: one conversation, one hash slot):
  ``<prefix>:msg:{<conversation_id>}:<seq>``  orjson of ``{"t": fill token, "d": has deleters,
                                              "s": the slot dict of adapters.codec minus del_list}``
  ``<prefix>:del:{<conversation_id>}:<seq>:<viewer>``  fill token + ``1`` (viewer deleted the
                                              seq) or ``0``; kept only for slots with deleters
  ``<prefix>:gen:{<conversation_id>}``        the conversation's invalidation generation
  ``<prefix>:marks:{<conversation_id>}``      ``<max_seq>,<min_seq>``: every viewer's watermarks
  ``<prefix>:umarks:{<conversation_id>}:<user>``  the user's own floor (``user_min_seq``)
  ``<prefix>:binding``                        the store this cache fronts (domain.cache_binding):
                                              no TTL; written by ``bind`` only

No deleter list is cached: a viewer's mark is valid only next to the slot entry whose fill token
it carries, so invalidating the slot entry (every write does) retires every viewer's mark.

The fill guard: a lookup reads the generation in the same MGET as the slots; a fill is one
Lua script that writes only if the generation is unchanged. Every invalidation replaces the
generation by a fresh random token and deletes its keys in one script, so a reader that
loaded a slot before a write cannot cache it after that write was invalidated. Watermarks
share the generation: a reader that read them before a clear or a send cannot put them back.
A pull is one script (``get_view``): the watermarks, then the slots they select, computed
inside Redis (``pull_latest`` depends on max_seq). See docs/redis.md.

On Redis Cluster (``make_client(url, cluster=True)``) every command of a conversation goes to
the master of its hash slot, and every generation and slot value is stamped with that master's
replication id and the cluster's epoch. Both change with a failover, so nothing written before
it (entries whose invalidation was lost with the old master, or could not be delivered while
the cluster was down) is served again: reads go through a script that drops other stamps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from imbucket.adapters.redis_breaker import Breaker
from imbucket.adapters.redis_client import (
    REDIS_ERRORS,
    Client,
    client_options,
    is_cluster,
    make_client,
)
from imbucket.adapters.redis_scripts import (
    CLUSTER_FILL,
    CLUSTER_INVALIDATE,
    CLUSTER_READ,
    CLUSTER_VIEW,
    FILL,
    INVALIDATE,
    VIEW,
)
from imbucket.adapters.redis_values import (
    encode_slot,
    entries,
    exact_glob,
    new_token,
    text_of,
    watermarks_of,
)
from imbucket.adapters.timeouts import (
    DEFAULT_CACHE_SECONDS,
    DEFAULT_CACHE_TTL_SECONDS,
    DEFAULT_CACHE_WARNING_SECONDS,
)
from imbucket.domain.errors import ConfigError
from imbucket.domain.model import Pick, Slot, Watermarks
from imbucket.ports.health import Reachability
from imbucket.ports.message_cache import CacheRead, ViewRead

log = logging.getLogger(__name__)

T = TypeVar("T")

# Pending invalidations delivered per pipeline round trip after an outage.
_FLUSH_BATCH = 200


@dataclass(frozen=True, slots=True)
class MarksOf:
    """A cached watermark entry: the conversation's (``user`` None) or one user's floor."""

    user: str | None = None


# What an invalidation drops: slot entries by seq, watermark entries.
Item = int | MarksOf


@dataclass(frozen=True, slots=True)
class _Ticket:
    """Fill permission: the generation seen by the lookup and the local failure epoch.

    ``tokens`` are the fill tokens of the cached slot entries with deleters that the lookup
    could not answer for the viewer: a fill writes only the viewer's mark next to them.
    """

    generation: bytes | str
    epoch: int
    tokens: dict[int, str] = field(default_factory=dict)


class RedisMessageCache:
    """The MessageCache port on Redis (or Redis Cluster: every command touches one hash slot).

    Never raises for Redis trouble: a failed lookup is a miss without a fill ticket, a failed
    fill is dropped, and a failed invalidation is remembered and delivered before this cache
    serves that conversation again. While Redis is unreachable the cache is skipped and
    retried every ``retry_interval`` seconds; one warning is logged per outage. On a cluster
    all of this is per master: a dead master makes only the conversations it served skip the
    cache, and invalidations for the other masters keep being delivered at once.
    """

    def __init__(
        self,
        client: Client,
        *,
        ttl_seconds: int = DEFAULT_CACHE_TTL_SECONDS,
        key_prefix: str = "imbucket",
        retry_interval: float = 1.0,
        max_pending: int = 100_000,
        warning_interval: float = DEFAULT_CACHE_WARNING_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not key_prefix or "{" in key_prefix or "}" in key_prefix:
            raise ConfigError(f"cache key prefix must be non-empty without braces: {key_prefix!r}")
        if ttl_seconds < 1:
            raise ConfigError(f"cache ttl must be at least 1 second, got {ttl_seconds}")
        self.client = client
        self.ttl_seconds = ttl_seconds
        self.key_prefix = key_prefix
        self._retry_interval = retry_interval
        self._max_pending = max_pending
        self._clock = clock
        self._cluster = is_cluster(client)
        cluster = self._cluster
        self._read = client.register_script(CLUSTER_READ) if cluster else None
        self._view = client.register_script(CLUSTER_VIEW if cluster else VIEW)
        self._fill = client.register_script(CLUSTER_FILL if cluster else FILL)
        self._invalidate = client.register_script(CLUSTER_INVALIDATE if cluster else INVALIDATE)
        self._lock = threading.Lock()  # guards the state below
        self._flush_lock = threading.Lock()  # one thread delivers pending invalidations
        # Per scope: "" or a cluster master's name.
        self._breaker = Breaker(retry_interval, warning_interval, clock, log)
        self._pending: dict[str, set[Item]] = {}
        self._pending_count = 0
        self._distrust_until = float("-inf")
        self._epoch = 0  # bumped by every invalidation that could not be delivered
        # The binding to confirm before serving or filling anything (None: confirmed).
        self._expected: str | None = None
        self._claim = False
        self._checked_at = float("-inf")

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        cluster: bool = False,
        socket_timeout: float = DEFAULT_CACHE_SECONDS,
        connect_timeout: float = DEFAULT_CACHE_SECONDS,
        asynchronous: bool = False,
        **options: Any,
    ) -> RedisMessageCache:
        """A cache on a new client for url; querystring options (socket_timeout=…) win.

        asynchronous: on redis.asyncio, every call run in a greenlet (``make_client``).
        """
        timeouts = client_options(socket_timeout, connect_timeout)
        client = make_client(url, cluster=cluster, asynchronous=asynchronous, **timeouts)
        return cls(client, **options)

    def slot_key(self, conversation_id: str, seq: int) -> str:
        """The key of one cached slot."""
        return f"{self._slot_base(conversation_id)}{seq}"

    def mark_key(self, conversation_id: str, seq: int, viewer: str) -> str:
        """The key of one viewer's "did I delete it" mark for a cached slot."""
        return f"{self._mark_base(conversation_id)}{seq}:{viewer}"

    def _slot_base(self, conversation_id: str) -> str:
        return f"{self.key_prefix}:msg:{{{conversation_id}}}:"

    def _mark_base(self, conversation_id: str) -> str:
        return f"{self.key_prefix}:del:{{{conversation_id}}}:"

    def generation_key(self, conversation_id: str) -> str:
        """The key of the conversation's invalidation generation (same hash slot)."""
        return f"{self.key_prefix}:gen:{{{conversation_id}}}"

    def marks_key(self, conversation_id: str, user_id: str | None = None) -> str:
        """The key of the conversation's watermarks (user_id None) or of a user's floor."""
        if user_id is None:
            return f"{self.key_prefix}:marks:{{{conversation_id}}}"
        return f"{self.key_prefix}:umarks:{{{conversation_id}}}:{user_id}"

    @property
    def binding_key(self) -> str:
        """The key holding the binding of the store this cache fronts."""
        return f"{self.key_prefix}:binding"

    def binding(self) -> str | None:
        """The binding this cache holds (None: none). Raises REDIS_ERRORS when unreachable."""
        return text_of(self.client.get(self.binding_key))

    def bind(self, binding: str | None) -> None:
        """Delete every key under the prefix, then hold binding (None: hold none).

        The binding goes first, so no service opens on it while entries are being deleted.
        Raises REDIS_ERRORS when Redis fails (run it again). On a cluster every master is
        scanned.
        """
        self.client.delete(self.binding_key)
        batch: list[Any] = []
        for key in self.client.scan_iter(match=f"{exact_glob(self.key_prefix)}:*", count=1_000):
            batch.append(key)
            if len(batch) >= 500:
                self.client.unlink(*batch)
                batch.clear()
        if batch:
            self.client.unlink(*batch)
        if binding is not None:
            self.client.set(self.binding_key, binding)

    def expect(self, binding: str, claim: bool = False) -> None:
        """Serve and fill nothing until this cache is found to hold binding.

        For a Redis unreachable when the service opened: reads and writes go to the store
        until then (invalidations are still delivered). claim: the store is new and chose
        binding; ``bind`` it once Redis answers. A cache found holding another binding is
        never used (one error logged).
        """
        with self._lock:
            self._expected, self._claim, self._checked_at = binding, claim, float("-inf")

    def _confirmed(self) -> bool:
        """Whether the expected binding is confirmed; asks Redis once per retry interval."""
        if self._expected is None:  # the fast path: one attribute read, no lock
            return True
        with self._lock:
            expected, claim = self._expected, self._claim
            if expected is None:
                return True
            now = self._clock()
            if now - self._checked_at < self._retry_interval:
                return False
            self._checked_at = now
        try:
            if claim:
                self.bind(expected)
            found = self.binding()
        except REDIS_ERRORS as error:
            self._failed(error, "")
            return False
        if found != expected:
            with self._lock:
                self._checked_at = float("inf")  # wrong cache: never used by this service
            log.error(
                "redis cache under prefix %r fronts another store: not using it; "
                "set cache.url and cache.key_prefix to this store's cache",
                self.key_prefix,
            )
            return False
        with self._lock:
            self._expected = None
        log.info("redis cache under prefix %r confirmed for this store", self.key_prefix)
        return True

    @property
    def pending(self) -> dict[str, frozenset[Item]]:
        """Invalidations not delivered yet, per conversation."""
        with self._lock:
            return {conv: frozenset(seqs) for conv, seqs in self._pending.items()}

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        """One lookup of the generation, the slots and (for a viewer) the viewer's marks.

        The lookup is an MGET, or on a cluster the read script (one EVALSHA, same keys; the
        marks share the conversation's hash tag, so they live on the same master). A slot
        with deleters is a hit only with a viewer whose mark carries its fill token; a
        miss-only result if Redis fails.
        """
        scope = self._scope(conversation_id)
        if not seqs or not self._confirmed() or not self._usable(scope):
            return CacheRead()
        if not self._deliver_pending(conversation_id):
            return CacheRead()
        epoch = self._epoch
        keys = [self.generation_key(conversation_id)]
        keys.extend(self.slot_key(conversation_id, seq) for seq in seqs)
        if viewer is not None:
            keys.extend(self.mark_key(conversation_id, seq, viewer) for seq in seqs)
        values = self._call(partial(self._lookup, keys), scope)
        if values is None:
            return CacheRead()
        marks = values[1 + len(seqs) :] if viewer is not None else [None] * len(seqs)
        slots, tokens = entries(conversation_id, seqs, values[1 : 1 + len(seqs)], marks, viewer)
        return CacheRead(slots, _Ticket(values[0] or b"", epoch, tokens))

    def get_view(self, conversation_id: str, viewer: str, pick: Pick) -> ViewRead:
        """One script call: the viewer's watermarks, then the slots and marks they select.

        Both watermark parts must be cached (else ``marks`` is None and no slot is read);
        the seqs of ``pick`` are computed in the script from them. Slots as ``get_many``.
        """
        scope = self._scope(conversation_id)
        if not self._confirmed() or not self._usable(scope):
            return ViewRead()
        if not self._deliver_pending(conversation_id):
            return ViewRead()
        epoch = self._epoch
        keys = [
            self.generation_key(conversation_id),
            self.marks_key(conversation_id),
            self.marks_key(conversation_id, viewer),
        ]
        args: list[str | int] = [
            self._slot_base(conversation_id),
            self._mark_base(conversation_id),
            f":{viewer}",
            pick.latest,
            *pick.seqs,
        ]
        reply = self._call(lambda: list(self._view(keys=keys, args=args)), scope)
        if reply is None:
            return ViewRead()
        marks = watermarks_of(reply[1], reply[2])
        if marks is None or len(reply) < 6:
            return ViewRead(ticket=_Ticket(reply[0] or b"", epoch))
        seqs = [int(seq) for seq in reply[3]]
        slots, tokens = entries(conversation_id, seqs, reply[4], reply[5], viewer)
        return ViewRead(marks, slots, _Ticket(reply[0] or b"", epoch, tokens))

    def put_many(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: object,
        viewer: str | None = None,
    ) -> None:
        """One script call: SET EX every slot (minus deleters) and the viewer's marks.

        Nothing is written when the generation moved since the lookup.
        """
        if slots and isinstance(ticket, _Ticket):
            self._fill_script(
                conversation_id, self._fills(conversation_id, slots, ticket, viewer), ticket
            )

    def put_view(
        self,
        conversation_id: str,
        viewer: str,
        marks: Watermarks | None,
        slots: Mapping[int, Slot],
        ticket: object,
    ) -> None:
        """One script call: the watermark parts (unless marks is None), slots and marks.

        Guarded like ``put_many``, with get_view's ticket.
        """
        if not isinstance(ticket, _Ticket):
            return
        fills = self._fills(conversation_id, slots, ticket, viewer)
        if marks is not None:
            fills[self.marks_key(conversation_id)] = f"{marks.max_seq},{marks.min_seq}"
            fills[self.marks_key(conversation_id, viewer)] = str(marks.user_min_seq)
        self._fill_script(conversation_id, fills, ticket)

    def _fills(
        self,
        conversation_id: str,
        slots: Mapping[int, Slot],
        ticket: _Ticket,
        viewer: str | None,
    ) -> dict[str, bytes | str]:
        """Key -> value of what a fill writes: new slot entries and the viewer's marks."""
        fresh = new_token()
        fills: dict[str, bytes | str] = {}
        for seq, slot in slots.items():
            token = ticket.tokens.get(seq)
            if token is None:  # a new entry: its marks of earlier fills no longer match
                token = fresh
                fills[self.slot_key(conversation_id, seq)] = encode_slot(token, slot)
            if viewer is not None and slot.deleted_by:
                fills[self.mark_key(conversation_id, seq, viewer)] = (
                    f"{token}{int(viewer in slot.deleted_by)}"
                )
        return fills

    def _fill_script(
        self, conversation_id: str, fills: dict[str, bytes | str], ticket: _Ticket
    ) -> None:
        """Write fills if the generation still equals the ticket's (one script call)."""
        if not fills or ticket.epoch != self._epoch or not self._confirmed():
            return
        scope = self._scope(conversation_id)
        if not self._usable(scope):
            return
        keys = [self.generation_key(conversation_id), *fills]
        args: list[bytes | str | int] = [
            ticket.generation,
            self.ttl_seconds,
            new_token(),
            *fills.values(),
        ]
        self._call(lambda: self._fill(keys=keys, args=args), scope)

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> bool:
        """Bump the generation and delete the keys; remember them if Redis cannot be reached.

        True when delivered to this store's cache now; False when remembered for later, or
        delivered to a Redis not (yet) confirmed to hold this store's binding.
        """
        if not seqs:
            return True
        return self._drop(conversation_id, seqs)

    def invalidate_marks(self, conversation_id: str, user_id: str | None = None) -> bool:
        """As ``invalidate``, for the conversation's watermarks or the user's floor."""
        return self._drop(conversation_id, [MarksOf(user_id)])

    def _drop(self, conversation_id: str, items: Sequence[Item]) -> bool:
        if self._try_invalidate(conversation_id, items, always=self._cluster):
            self._deliver_pending()  # a process that only writes must deliver them too
            return self._expected is None
        self._remember(conversation_id, items)
        return False

    def probe(self) -> Reachability:
        """One PING now (within the timeouts), and whether this store's binding is confirmed."""
        backend = "redis-cluster" if self._cluster else "redis"
        try:
            self.client.ping()
        except REDIS_ERRORS as error:
            self._failed(error, "")
            detail = f"{type(error).__name__}: {error}; check cache.url"
            return Reachability("cache", backend, False, detail)
        if not self._confirmed():
            detail = (
                f"Redis answers but does not hold this store's binding under prefix "
                f"{self.key_prefix!r}: check cache.url and cache.key_prefix"
            )
            return Reachability("cache", backend, False, detail)
        return Reachability("cache", backend, True)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def _lookup(self, keys: list[str]) -> list[Any]:
        """The values of keys: one MGET, or on a cluster one script (same-id stamps only)."""
        if self._read is None:
            return list(self.client.mget(keys))
        return list(self._read(keys=keys))

    def _scope(self, conversation_id: str) -> str:
        """Whose health a conversation's commands depend on: "" or its cluster master's name."""
        if not self._cluster:
            return ""
        cluster: Any = self.client
        try:
            return str(cluster.get_node_from_key(self.generation_key(conversation_id)).name)
        except REDIS_ERRORS:
            return "?"  # slot not covered right now: the command itself will tell

    def _try_invalidate(self, conversation_id: str, items: Sequence[Item], always: bool) -> bool:
        """Invalidate now if the conversation's Redis is usable (or always); True if delivered.

        A write's own invalidation on a cluster is always tried: a master that failed may have
        been replaced by its replica, which others may read already; the client learns the new
        topology from the failure and retries once on the new master. (Writes from before the
        promotion need no delivery there: the replica's new replication id voids them.)
        """
        scope = self._scope(conversation_id)
        if not always and not self._usable(scope):
            return False
        return bool(self._call(partial(self._run_invalidate, conversation_id, items), scope))

    def _run_invalidate(
        self, conversation_id: str, items: Sequence[Item], client: Any = None
    ) -> Any:
        keys = [self.generation_key(conversation_id)]
        keys.extend(
            self.marks_key(conversation_id, item.user)
            if isinstance(item, MarksOf)
            else self.slot_key(conversation_id, item)
            for item in items
        )
        return self._invalidate(keys=keys, args=[self.ttl_seconds, new_token()], client=client)

    def _remember(self, conversation_id: str, seqs: Sequence[Item]) -> None:
        with self._lock:
            self._epoch += 1
            known = self._pending.setdefault(conversation_id, set())
            before = len(known)
            overflow = self._pending_count + len(seqs) > self._max_pending
            if not overflow:
                known.update(seqs)
            self._pending_count += len(known) - before
            if not known:
                del self._pending[conversation_id]
            if overflow:
                # Lost track: stop reading the cache until every entry written before now
                # has expired, so this process never serves what it failed to invalidate.
                now = self._clock()
                first = now >= self._distrust_until
                self._distrust_until = now + self.ttl_seconds
        if overflow and first:
            log.error(
                "redis cache: more than %d undelivered invalidations; not using the cache "
                "for the next %d s (its TTL)",
                self._max_pending,
                self.ttl_seconds,
            )

    def _deliver_pending(self, conversation_id: str | None = None) -> bool:
        """Deliver remembered invalidations; False while any remain for conversation_id.

        False means: skip the cache for that conversation (for any, when None).
        """
        if self._settled(conversation_id):
            return True
        if not self._flush_lock.acquire(blocking=False):
            return False  # another thread is delivering: read from the store meanwhile
        try:
            with self._lock:
                batch = [(conv, list(items)) for conv, items in self._pending.items()]
            if self._cluster:
                for conv, seqs in batch:  # each to its own master, skipping the dead ones
                    if self._try_invalidate(conv, seqs, always=False):
                        self._forget([(conv, seqs)])
            else:
                for start in range(0, len(batch), _FLUSH_BATCH):
                    chunk = batch[start : start + _FLUSH_BATCH]
                    if self._call(partial(self._flush, chunk), "") is None:
                        break
                    self._forget(chunk)
            return self._settled(conversation_id)
        finally:
            self._flush_lock.release()

    def _settled(self, conversation_id: str | None) -> bool:
        with self._lock:
            if conversation_id is None:
                return not self._pending
            return conversation_id not in self._pending

    def _flush(self, chunk: list[tuple[str, list[Item]]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for conversation_id, seqs in chunk:
            self._run_invalidate(conversation_id, seqs, client=pipe)
        result: list[Any] = pipe.execute()
        return result

    def _forget(self, delivered: list[tuple[str, list[Item]]]) -> None:
        with self._lock:
            for conversation_id, seqs in delivered:
                known = self._pending.get(conversation_id)
                if known is None:
                    continue
                before = len(known)
                known.difference_update(seqs)
                self._pending_count -= before - len(known)
                if not known:
                    del self._pending[conversation_id]

    def _usable(self, scope: str) -> bool:
        """False while this process distrusts the cache, or an outage of scope is recent."""
        if self._clock() < self._distrust_until:
            return False
        return self._breaker.usable(scope)

    def _call(self, command: Callable[[], T], scope: str) -> T | None:
        """Run a Redis command for scope; None (and outage bookkeeping) if it fails."""
        try:
            result = command()
        except REDIS_ERRORS as error:
            self._failed(error, scope)
            return None
        self._breaker.succeeded(scope)
        return result

    def _failed(self, error: Exception, scope: str) -> None:
        self._breaker.failed(error, scope)
