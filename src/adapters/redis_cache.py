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
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import orjson
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry

from imbucket.adapters import greenlets
from imbucket.adapters.codec import slot_from_doc, slot_to_doc
from imbucket.domain.errors import ConfigError
from imbucket.domain.model import Pick, Slot, Watermarks, viewed_deleters
from imbucket.ports.health import Reachability
from imbucket.ports.message_cache import CacheRead, ViewRead

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TTL_SECONDS = 24 * 3600
DEFAULT_TIMEOUT_SECONDS = 0.25

# Generations are random tokens, never counters: a generation key that vanished (eviction,
# restart without persistence) and came back can never repeat the value a reader saw.

# KEYS[1] generation, KEYS[2..] slot keys; ARGV[1] generation seen by the reader ('' = none),
# ARGV[2] ttl, ARGV[3] a fresh token, ARGV[4..] values in KEYS order.
# A reader that saw no generation only starts one: with nothing to compare, it cannot tell
# whether an invalidation came and went while it read the store.
_FILL = """
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
  return 0
end
if current ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 2], 'EX', ARGV[2])
end
return 1
"""

# KEYS[1] generation, KEYS[2..] slot keys; ARGV[1] ttl, ARGV[2] a fresh token.
_INVALIDATE = """
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[1])
for i = 2, #KEYS, 500 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 499, #KEYS)))
end
return 1
"""

# The cluster variants stamp the generation ("<stamp><token>") and every slot value
# ("<stamp><json>") with where and when they were written: "<replid>/<epoch>|", the writing
# master's replication id and the cluster's current epoch. A failover gives the promoted replica
# a new replication id and raises the epoch of every master that serves again (they voted for
# it, or learn of it before their slots are ok again). So after a failover nothing written
# before it counts: neither what the promoted replica inherited (invalidations its master lost)
# nor what the other masters held while the cluster refused every command (invalidations
# nobody could deliver). A ticket from before fills nothing. INFO and CLUSTER INFO are the one
# way a script can learn either.
_STAMP = """
local stamp = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') .. '/' ..
  string.match(redis.call('CLUSTER', 'INFO'), 'cluster_current_epoch:(%d+)') .. '|'
"""

# KEYS[1] generation, KEYS[2..] slot keys: the generation, then each slot, or false.
_CLUSTER_READ = (
    _STAMP
    + """
local n = #stamp
local values = {}
for i = 1, #KEYS, 500 do
  local part = redis.call('MGET', unpack(KEYS, i, math.min(i + 499, #KEYS)))
  for j = 1, #part do values[i + j - 1] = part[j] end
end
for i = 1, #values do
  local v = values[i]
  if v and string.sub(v, 1, n) ~= stamp then values[i] = false
  elseif v and i > 1 then values[i] = string.sub(v, n + 1) end
end
return values
"""
)

# As _FILL.
_CLUSTER_FILL = (
    _STAMP
    + """
local current = redis.call('GET', KEYS[1])
if not current or string.sub(current, 1, #stamp) ~= stamp then
  redis.call('SET', KEYS[1], stamp .. ARGV[3], 'EX', ARGV[2])
  return 0
end
if current ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], stamp .. ARGV[i + 2], 'EX', ARGV[2])
end
return 1
"""
)

# As _INVALIDATE.
_CLUSTER_INVALIDATE = (
    _STAMP
    + """
redis.call('SET', KEYS[1], stamp .. ARGV[2], 'EX', ARGV[1])
for i = 2, #KEYS, 500 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 499, #KEYS)))
end
return 1
"""
)

# The pull's lookup (``get_view``), after a ``stamp`` prelude ('' on a single Redis).
# KEYS[1] generation, KEYS[2] conversation watermarks, KEYS[3] the viewer's floor; ARGV[1] the
# slot key base, ARGV[2] the mark key base, ARGV[3] ':' .. viewer, ARGV[4] latest count (0: the
# listed seqs ARGV[5..]). Returns {generation, conversation marks, user floor} when either
# watermark part misses, else those and {seqs read}, {slot values}, {viewer marks}.
# The seqs mirror domain.model.Watermarks.latest / visible; Python re-applies the domain rule
# and treats anything else as a miss. Seqs above 15 digits (beyond exact doubles) read nothing
# here for latest; listed seqs keep their own text in key names. The slot keys are built here
# from the conversation's key bases: same hash tag as KEYS, so the same cluster slot.
_VIEW_BODY = """
local n = #stamp
local function fresh(v)
  if v and string.sub(v, 1, n) == stamp then return string.sub(v, n + 1) end
  return false
end
local function mget(keys)
  local values = {}
  for i = 1, #keys, 500 do
    local part = redis.call('MGET', unpack(keys, i, math.min(i + 499, #keys)))
    for j = 1, #part do values[i + j - 1] = fresh(part[j]) end
  end
  return values
end
local head = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local gen = head[1]
if gen and string.sub(gen, 1, n) ~= stamp then gen = false end
local conv, user = fresh(head[2]), fresh(head[3])
if not conv or not user then return {gen, conv, user} end
local top_text, min_text = string.match(conv, '^(%d+),(%d+)$')
if not top_text or not string.match(user, '^%d+$') then return {gen, false, false} end
local top = tonumber(top_text)
local floor = math.max(tonumber(min_text), tonumber(user))
local count = tonumber(ARGV[4])
local seqs = {}
if count > 0 then
  if #top_text <= 15 then
    for s = math.max(top - count + 1, floor, 1), top do seqs[#seqs + 1] = string.format('%d', s) end
  end
else
  for i = 5, #ARGV do
    local s = tonumber(ARGV[i])
    if s >= floor and s <= top then seqs[#seqs + 1] = ARGV[i] end
  end
end
local slot_keys, mark_keys = {}, {}
for i = 1, #seqs do
  slot_keys[i] = ARGV[1] .. seqs[i]
  mark_keys[i] = ARGV[2] .. seqs[i] .. ARGV[3]
end
local slots, marks = {}, {}
if #seqs > 0 then slots, marks = mget(slot_keys), mget(mark_keys) end
return {gen, conv, user, seqs, slots, marks}
"""
_VIEW = "local stamp = ''\n" + _VIEW_BODY
_CLUSTER_VIEW = _STAMP + _VIEW_BODY

# Pending invalidations delivered per pipeline round trip after an outage.
_FLUSH_BATCH = 200

# A client, or under imbucket.aio an asyncio one behind greenlets.Awaiting (the same calls).
Client = redis.Redis | RedisCluster | greenlets.Awaiting
# Everything a Redis or cluster client raises for an unreachable or failing Redis.
REDIS_ERRORS = (RedisError, RedisClusterException, OSError)
# What a cache client retries (once, at once): a dropped connection; never a timeout.
_RETRIED = (RedisConnectionError,)
TOPOLOGY_ATTEMPTS = 3
_Client = TypeVar("_Client")


def client_options(
    timeout: float = DEFAULT_TIMEOUT_SECONDS, connect_timeout: float | None = None
) -> dict[str, Any]:
    """Client settings for a cache: short timeouts, no waiting on a Redis that is down.

    timeout bounds the wait for each reply (``cache.socket_timeout_seconds``), connect_timeout
    the opening of a connection (``cache.connect_timeout_seconds``; timeout when None). The
    same options suit a cluster client.
    """
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout if connect_timeout is None else connect_timeout,
        # One immediate retry for a dropped connection; none for timeouts (slow = skip).
        "retry": Retry(NoBackoff(), 1, supported_errors=_RETRIED),
    }


def make_client(url: str, *, cluster: bool = False, **options: Any) -> Client:
    """The one place cache clients are built: a Redis, or a cluster client for ``cluster``.

    ``options`` are client keyword arguments on top of ``client_options()``; querystring options
    of url win over both. A cluster url names any node (``redis://host:port``); the client
    asks it for the topology at once, and raises ``RedisClusterException`` (or a ``RedisError``)
    when no node answers. On a cluster the retry covers redirections and topology refreshes:
    one immediate retry, so a dead master costs one quick failure, not a backoff.
    """
    settings = {**client_options(), **options}
    if greenlets.asynchronous():
        return _asyncio_client(url, cluster, settings)
    if not cluster:
        return redis.Redis.from_url(url, **settings)
    # Reads go to masters only (the default): a replica may lag behind an invalidation.
    return _asking_for_topology(lambda: RedisCluster.from_url(url, **settings))


def _asking_for_topology(connect: Callable[[], _Client]) -> _Client:
    """connect(), tried up to TOPOLOGY_ATTEMPTS times while no node answers.

    The topology is asked for once, when a service starts: there a node slow to accept its
    first connection (a busy machine) must not fail the start, as it may skip one cache read.
    """
    for _ in range(TOPOLOGY_ATTEMPTS - 1):
        try:
            return connect()
        except REDIS_ERRORS:
            pass
    return connect()


def _asyncio_client(url: str, cluster: bool, settings: dict[str, Any]) -> greenlets.Awaiting:
    """Under imbucket.aio: a redis.asyncio client whose calls wait in the running greenlet."""
    from redis.asyncio import Redis as AsyncRedis
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    from redis.asyncio.retry import Retry as AsyncRetry

    retry: Retry = settings["retry"]
    settings["retry"] = AsyncRetry(NoBackoff(), retry.get_retries(), supported_errors=_RETRIED)
    if not cluster:
        return greenlets.Awaiting(AsyncRedis.from_url(url, **settings))

    def connect() -> AsyncRedisCluster:
        client = AsyncRedisCluster.from_url(url, **settings)
        greenlets.wait_for(client.initialize())  # the topology now, as the sync client asks it
        return client

    return greenlets.Awaiting(_asking_for_topology(connect))


def is_cluster(client: Any) -> bool:
    """Whether client (or the asyncio client behind it) talks to a Redis Cluster."""
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    return isinstance(greenlets.unwrap(client), RedisCluster | AsyncRedisCluster)


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
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        key_prefix: str = "imbucket",
        retry_interval: float = 1.0,
        max_pending: int = 100_000,
        warning_interval: float = 60.0,
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
        self._warning_interval = warning_interval
        self._clock = clock
        self._cluster = is_cluster(client)
        cluster = self._cluster
        self._read = client.register_script(_CLUSTER_READ) if cluster else None
        self._view = client.register_script(_CLUSTER_VIEW if cluster else _VIEW)
        self._fill = client.register_script(_CLUSTER_FILL if cluster else _FILL)
        self._invalidate = client.register_script(_CLUSTER_INVALIDATE if cluster else _INVALIDATE)
        self._lock = threading.Lock()  # guards the state below
        self._flush_lock = threading.Lock()  # one thread delivers pending invalidations
        self._health: dict[str, _Health] = {}  # per scope: "" or a cluster master's name
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
        socket_timeout: float = DEFAULT_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **options: Any,
    ) -> RedisMessageCache:
        """A cache on a new client for url; querystring options (socket_timeout=…) win."""
        timeouts = client_options(socket_timeout, connect_timeout)
        return cls(make_client(url, cluster=cluster, **timeouts), **options)

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
        return _text(self.client.get(self.binding_key))

    def bind(self, binding: str | None) -> None:
        """Delete every key under the prefix, then hold binding (None: hold none).

        The binding goes first, so no service opens on it while entries are being deleted.
        Raises REDIS_ERRORS when Redis fails (run it again). On a cluster every master is
        scanned.
        """
        self.client.delete(self.binding_key)
        batch: list[Any] = []
        for key in self.client.scan_iter(match=f"{_glob(self.key_prefix)}:*", count=1_000):
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
        slots, tokens = _entries(conversation_id, seqs, values[1 : 1 + len(seqs)], marks, viewer)
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
        marks = _watermarks(reply[1], reply[2])
        if marks is None or len(reply) < 6:
            return ViewRead(ticket=_Ticket(reply[0] or b"", epoch))
        seqs = [int(seq) for seq in reply[3]]
        slots, tokens = _entries(conversation_id, seqs, reply[4], reply[5], viewer)
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
        fresh = _token()
        fills: dict[str, bytes | str] = {}
        for seq, slot in slots.items():
            token = ticket.tokens.get(seq)
            if token is None:  # a new entry: its marks of earlier fills no longer match
                token = fresh
                fills[self.slot_key(conversation_id, seq)] = _encode(token, slot)
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
            _token(),
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
        return self._invalidate(keys=keys, args=[self.ttl_seconds, _token()], client=client)

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
        """False while an outage of scope is recent: skip Redis instead of waiting for timeouts."""
        with self._lock:
            now = self._clock()
            if now < self._distrust_until:
                return False
            health = self._health.get(scope)
            if health is None or health.down_since is None:
                return True
            return now - health.last_failure >= self._retry_interval

    def _call(self, command: Callable[[], T], scope: str) -> T | None:
        """Run a Redis command for scope; None (and outage bookkeeping) if it fails."""
        try:
            result = command()
        except REDIS_ERRORS as error:
            self._failed(error, scope)
            return None
        self._succeeded(scope)
        return result

    def _failed(self, error: Exception, scope: str) -> None:
        """Open the breaker for scope; warn when the outage starts and again every interval."""
        with self._lock:
            now = self._clock()
            health = self._health.setdefault(scope, _Health())
            health.last_failure = now
            if health.down_since is None:
                health.down_since = now
            elif now - health.warned_at < self._warning_interval:
                return
            health.warned_at = now
            outage = now - health.down_since
        log.warning(
            "redis cache unavailable%s for %.0f s (%s: %s); reading and writing through to the "
            "store until it answers again",
            f" at {scope}" if scope else "",
            outage,
            type(error).__name__,
            error,
        )

    def _succeeded(self, scope: str) -> None:
        with self._lock:
            health = self._health.get(scope)
            if health is None or health.down_since is None:
                return
            outage = self._clock() - health.down_since
            health.down_since = None
        log.info(
            "redis cache%s available again after %.1f s", f" at {scope}" if scope else "", outage
        )


@dataclass(slots=True)
class _Health:
    """Outage bookkeeping of one Redis (or one cluster master)."""

    down_since: float | None = None
    last_failure: float = 0.0
    warned_at: float = float("-inf")


def _token() -> str:
    """A fresh generation token."""
    return secrets.token_hex(8)


def _glob(text: str) -> str:
    """The SCAN MATCH pattern that matches text itself only."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


def _text(value: bytes | str | None) -> str | None:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _entries(
    conversation_id: str,
    seqs: Sequence[int],
    values: Sequence[bytes | str | None],
    marks: Sequence[bytes | str | None],
    viewer: str | None,
) -> tuple[dict[int, Slot], dict[int, str]]:
    """The slots a lookup answers for viewer, and the tokens of entries it could not answer.

    A slot with deleters is answered only with the viewer's mark carrying its fill token.
    """
    slots: dict[int, Slot] = {}
    tokens: dict[int, str] = {}
    for seq, value, mark in zip(seqs, values, marks, strict=True):
        entry = None if value is None else _decode(conversation_id, value)
        if entry is None:
            continue
        token, slot, deleters = entry
        if not deleters:
            slots[seq] = slot
        elif viewer is not None and _text(mark) in (f"{token}1", f"{token}0"):
            deleted = _text(mark) == f"{token}1"
            slots[seq] = replace(slot, deleted_by=viewed_deleters(viewer, deleted, True))
        else:
            tokens[seq] = token
    return slots, tokens


def _watermarks(conversation: bytes | str | None, user: bytes | str | None) -> Watermarks | None:
    """The watermarks of the two cached parts ("max,min" and the user's floor); None if not both."""
    conv, floor = _text(conversation), _text(user)
    if not conv or not floor:
        return None
    try:
        max_seq, min_seq = (int(part) for part in conv.split(","))
        return Watermarks(max_seq, min_seq, int(floor))
    except ValueError:
        return None


def _encode(token: str, slot: Slot) -> bytes:
    """A slot entry: its fill token, whether it has deleters, the slot without them."""
    doc = slot_to_doc(slot)
    del doc["del_list"]
    return orjson.dumps({"t": token, "d": bool(slot.deleted_by), "s": doc})


def _decode(conversation_id: str, value: bytes | str) -> tuple[str, Slot, bool] | None:
    """A slot entry: (token, slot without deleters, has deleters).

    None for an unreadable value (treated as a miss and refilled).
    """
    try:
        entry = orjson.loads(value)
        return str(entry["t"]), slot_from_doc(conversation_id, entry["s"]), bool(entry["d"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
