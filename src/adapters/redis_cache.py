"""RedisMessageCache: raw slots per seq in Redis, guarded against stale fills, outage-tolerant.

Keys (the braces are a Redis Cluster hash tag: one conversation, one hash slot):
  ``<prefix>:msg:{<conversation_id>}:<seq>``  orjson of ``{"t": fill token, "d": has deleters,
                                              "s": the slot dict of adapters.codec minus del_list}``
  ``<prefix>:del:{<conversation_id>}:<seq>:<viewer>``  fill token + ``1`` (viewer deleted the
                                              seq) or ``0``; kept only for slots with deleters
  ``<prefix>:gen:{<conversation_id>}``        the conversation's invalidation generation

No deleter list is cached: a viewer's mark is valid only next to the slot entry whose fill token
it carries, so invalidating the slot entry (every write does) retires every viewer's mark.

The fill guard: a lookup reads the generation in the same MGET as the slots; a fill is one
Lua script that writes only if the generation is unchanged. Every invalidation replaces the
generation by a fresh random token and deletes its keys in one script, so a reader that
loaded a slot before a write cannot cache it after that write was invalidated. See
docs/redis.md.
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
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.retry import Retry

from adapters.codec import slot_from_doc, slot_to_doc
from domain.errors import ConfigError
from domain.model import Slot, viewed_deleters
from ports.message_cache import CacheRead

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

# Pending invalidations delivered per pipeline round trip after an outage.
_FLUSH_BATCH = 200


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
        "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    }


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
    serves anything again. While Redis is unreachable the cache is skipped entirely and
    retried every ``retry_interval`` seconds; one warning is logged per outage.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        key_prefix: str = "imbucket",
        retry_interval: float = 1.0,
        max_pending: int = 100_000,
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
        self._fill = client.register_script(_FILL)
        self._invalidate = client.register_script(_INVALIDATE)
        self._lock = threading.Lock()  # guards the state below
        self._flush_lock = threading.Lock()  # one thread delivers pending invalidations
        self._down_since: float | None = None
        self._last_failure = 0.0
        self._pending: dict[str, set[int]] = {}
        self._pending_count = 0
        self._distrust_until = float("-inf")
        self._epoch = 0  # bumped by every invalidation that could not be delivered

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        socket_timeout: float = DEFAULT_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_TIMEOUT_SECONDS,
        **options: Any,
    ) -> RedisMessageCache:
        """A cache on a new client for url; querystring options (socket_timeout=…) win."""
        client = redis.Redis.from_url(url, **client_options(socket_timeout, connect_timeout))
        return cls(client, **options)

    def slot_key(self, conversation_id: str, seq: int) -> str:
        """The key of one cached slot."""
        return f"{self.key_prefix}:msg:{{{conversation_id}}}:{seq}"

    def mark_key(self, conversation_id: str, seq: int, viewer: str) -> str:
        """The key of one viewer's "did I delete it" mark for a cached slot."""
        return f"{self.key_prefix}:del:{{{conversation_id}}}:{seq}:{viewer}"

    def generation_key(self, conversation_id: str) -> str:
        """The key of the conversation's invalidation generation (same hash slot)."""
        return f"{self.key_prefix}:gen:{{{conversation_id}}}"

    @property
    def pending(self) -> dict[str, frozenset[int]]:
        """Invalidations not delivered yet, per conversation."""
        with self._lock:
            return {conv: frozenset(seqs) for conv, seqs in self._pending.items()}

    def get_many(
        self, conversation_id: str, seqs: Sequence[int], viewer: str | None = None
    ) -> CacheRead:
        """One MGET of the generation, the slots and (for a viewer) the viewer's marks.

        A slot with deleters is a hit only with a viewer whose mark carries its fill token;
        a miss-only result if Redis fails.
        """
        if not seqs or not self._usable() or not self._deliver_pending():
            return CacheRead()
        epoch = self._epoch
        keys = [self.generation_key(conversation_id)]
        keys.extend(self.slot_key(conversation_id, seq) for seq in seqs)
        if viewer is not None:
            keys.extend(self.mark_key(conversation_id, seq, viewer) for seq in seqs)
        values = self._call(lambda: self.client.mget(keys))
        if values is None:
            return CacheRead()
        marks = values[1 + len(seqs) :] if viewer is not None else [None] * len(seqs)
        slots: dict[int, Slot] = {}
        tokens: dict[int, str] = {}
        for seq, value, mark in zip(seqs, values[1 : 1 + len(seqs)], marks, strict=True):
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
        return CacheRead(slots, _Ticket(values[0] or b"", epoch, tokens))

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
        if not slots or not isinstance(ticket, _Ticket) or ticket.epoch != self._epoch:
            return
        if not self._usable():
            return
        fresh = _token()
        keys = [self.generation_key(conversation_id)]
        values: list[bytes | str] = []
        for seq, slot in slots.items():
            token = ticket.tokens.get(seq)
            if token is None:  # a new entry: its marks of earlier fills no longer match
                token = fresh
                keys.append(self.slot_key(conversation_id, seq))
                values.append(_encode(token, slot))
            if viewer is not None and slot.deleted_by:
                keys.append(self.mark_key(conversation_id, seq, viewer))
                values.append(f"{token}{int(viewer in slot.deleted_by)}")
        if len(keys) == 1:
            return
        args: list[bytes | str | int] = [ticket.generation, self.ttl_seconds, _token(), *values]
        self._call(lambda: self._fill(keys=keys, args=args))

    def invalidate(self, conversation_id: str, seqs: Sequence[int]) -> None:
        """Bump the generation and delete the keys; remember them if Redis cannot be reached."""
        if not seqs:
            return
        if self._usable() and self._call(lambda: self._run_invalidate(conversation_id, seqs)):
            self._deliver_pending()  # a process that only writes must deliver them too
            return
        self._remember(conversation_id, seqs)

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def _run_invalidate(self, conversation_id: str, seqs: Sequence[int], client: Any = None) -> Any:
        keys = [self.generation_key(conversation_id)]
        keys.extend(self.slot_key(conversation_id, seq) for seq in seqs)
        return self._invalidate(keys=keys, args=[self.ttl_seconds, _token()], client=client)

    def _remember(self, conversation_id: str, seqs: Sequence[int]) -> None:
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

    def _deliver_pending(self) -> bool:
        """Deliver remembered invalidations; False (skip the cache) while any remain."""
        with self._lock:
            if not self._pending:
                return True
        if not self._flush_lock.acquire(blocking=False):
            return False  # another thread is delivering: read from the store meanwhile
        try:
            with self._lock:
                batch = [(conv, sorted(seqs)) for conv, seqs in self._pending.items()]
            for start in range(0, len(batch), _FLUSH_BATCH):
                chunk = batch[start : start + _FLUSH_BATCH]
                if self._call(partial(self._flush, chunk)) is None:
                    return False
                self._forget(chunk)
            with self._lock:
                return not self._pending
        finally:
            self._flush_lock.release()

    def _flush(self, chunk: list[tuple[str, list[int]]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for conversation_id, seqs in chunk:
            self._run_invalidate(conversation_id, seqs, client=pipe)
        result: list[Any] = pipe.execute()
        return result

    def _forget(self, delivered: list[tuple[str, list[int]]]) -> None:
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

    def _usable(self) -> bool:
        """False while an outage is recent: skip Redis instead of waiting for timeouts."""
        with self._lock:
            now = self._clock()
            if now < self._distrust_until:
                return False
            return self._down_since is None or now - self._last_failure >= self._retry_interval

    def _call(self, command: Callable[[], T]) -> T | None:
        """Run a Redis command; None (and outage bookkeeping) if it fails."""
        try:
            result = command()
        except (RedisError, OSError) as error:
            self._failed(error)
            return None
        self._succeeded()
        return result

    def _failed(self, error: Exception) -> None:
        with self._lock:
            now = self._clock()
            self._last_failure = now
            if self._down_since is not None:
                return
            self._down_since = now
        log.warning(
            "redis cache unavailable (%s: %s); reading and writing through to the store until "
            "it answers again",
            type(error).__name__,
            error,
        )

    def _succeeded(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            outage = self._clock() - self._down_since
            self._down_since = None
        log.info("redis cache available again after %.1f s", outage)


def _token() -> str:
    """A fresh generation token."""
    return secrets.token_hex(8)


def _text(value: bytes | str | None) -> str | None:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


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
