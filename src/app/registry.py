"""The registries of store backends (built-in and by entry point) and of cache backends.

As SQLAlchemy's dialect loader does, a built-in backend is one registration: its name, the
``"module:function"`` of its factory (imported only when a configuration selects it) and its
rules (``BackendRules``). A name that is not built in is looked up in the entry point group
``imbucket.backends`` (docs/plugins.md); a built-in name always means the built-in backend, so
a plugin cannot shadow it. Every check of a backend name goes through ``REGISTRY.get``; of a
cache backend's, through ``CACHES.get``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

from imbucket.adapters.timeouts import PoolSize, Timeouts
from imbucket.app.backends import Backend, StoreFactory
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import ConfigError
from imbucket.domain.layout import ENCODINGS, BucketLayout

PLUGIN_GROUP = "imbucket.backends"
# MongoDB's largest document (maxBsonObjectSize): a bucket, and a write carrying a bucket's
# messages, must fit it.
MONGO_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

Layout = Literal["buckets", "rows"]


@dataclass(frozen=True, slots=True)
class BackendRules:
    """What settings load checks and the composition root decides for one backend.

    layout: how the store keeps messages; None for a plugin, whose layout is known once its
    store is opened (a ``BucketMessageStore`` stores buckets). encodings: the bucket encodings
    it writes, default_encoding the one it writes when ``store.bucket_encoding`` is unset.
    max_document_bytes: the engine's largest document, which a bucket must fit. persists:
    whether data outlives the store's close; locate: ``"module:function"`` naming where a url
    keeps its data (None when it keeps nothing), for backends whose url decides that.
    pooled: the factory takes a ``pool`` keyword (the connections kept on a server).
    asyncio: whether ``imbucket.aio`` can open it. asyncio_drivers: the factory takes an
    ``asynchronous`` keyword, True under ``imbucket.aio``, and then opens its drivers' asyncio
    mode; a factory without it (memory, a plugin) is called as for the sync API, and its calls
    run in the greenlet of the async call as they are.
    family: the stores of one family differ only in layout (``sql``, ``mongo``, ``memory``,
    ``openim``); the bench pairs them. Empty for a plugin.
    """

    layout: Layout | None
    encodings: tuple[str, ...] = ENCODINGS
    default_encoding: str = "openim"
    max_document_bytes: int | None = None
    persists: bool = True
    locate: str | None = None
    pooled: bool = False
    asyncio: bool = True
    asyncio_drivers: bool = False
    family: str = ""


# A third-party backend: any encoding, its layout told by the store it opens.
PLUGIN_RULES = BackendRules(layout=None)


@dataclass(frozen=True, slots=True)
class Registration:
    """One backend a configuration may name: where its factory lives, and its rules."""

    name: str
    target: str  # "module:function"
    rules: BackendRules
    builtin: bool = True

    def load(self) -> StoreFactory:
        """Import the factory; ConfigError naming the backend when its package fails to load."""
        try:
            if not self.builtin:
                factory: StoreFactory = EntryPoint(self.name, self.target, PLUGIN_GROUP).load()
                return factory
            module, _, attribute = self.target.partition(":")
            found: StoreFactory = getattr(import_module(module), attribute)
            return found
        except (ImportError, AttributeError) as error:
            message = f"store backend {self.name!r} ({self.target}) fails to load: {error}"
            raise ConfigError(message) from None

    def open(
        self,
        url: str,
        layout: BucketLayout,
        budget: TagBudget,
        timeouts: Timeouts,
        pool: PoolSize,
        *,
        asynchronous: bool = False,
    ) -> Backend:
        """The backend, opened by its factory with the keywords its rules say it takes.

        asynchronous: on asyncio drivers, for ``imbucket.aio`` (``BackendRules.asyncio``
        says whether it may ask).
        """
        factory: Callable[..., object] = self.load()
        keywords: dict[str, Any] = {}
        if self.rules.pooled:
            keywords["pool"] = pool
        if self.rules.asyncio_drivers:
            keywords["asynchronous"] = asynchronous
        return self.checked(factory(url, layout, budget, timeouts, **keywords))

    def location(self, url: str) -> tuple[str, ...] | None:
        """Where the backend keeps its data at url, equal for one store; None when nowhere."""
        if not self.rules.persists:
            return None
        if self.rules.locate is None:
            return (self.name, url)
        module, _, function = self.rules.locate.partition(":")
        found: tuple[str, ...] | None = getattr(import_module(module), function)(url)
        return None if found is None else (self.name, *found)

    def checked(self, backend: object) -> Backend:
        """backend, if the factory returned a Backend; else ConfigError."""
        if not isinstance(backend, Backend):
            kind = type(backend).__name__
            raise ConfigError(f"store backend {self.name!r} returned {kind}, not Backend")
        return backend


class Registry:
    """The built-in registrations, then the entry points of PLUGIN_GROUP (read on each call)."""

    def __init__(self) -> None:
        self._builtins: dict[str, Registration] = {}

    def register(self, name: str, target: str, rules: BackendRules) -> None:
        """Add a built-in backend: name, its factory as "module:function", and its rules."""
        self._builtins[name] = Registration(name, target, rules)

    def builtins(self) -> tuple[str, ...]:
        """The built-in backends' names, in registration order."""
        return tuple(self._builtins)

    def plugins(self) -> tuple[str, ...]:
        """The names installed packages register in PLUGIN_GROUP (none is imported)."""
        return tuple(sorted(self._entry_points().keys() - self._builtins.keys()))

    def names(self) -> tuple[str, ...]:
        """Every backend a configuration may name: the built-in ones, then the plugins."""
        return (*self._builtins, *self.plugins())

    def get(self, name: str) -> Registration:
        """The registration of name; ConfigError listing the known names when there is none."""
        if name in self._builtins:
            return self._builtins[name]
        entry = self._entry_points().get(name)
        if entry is None:
            raise ConfigError(f"unknown store backend {name!r}; known: {', '.join(self.names())}")
        return Registration(name, entry.value, PLUGIN_RULES, builtin=False)

    @staticmethod
    def _entry_points() -> dict[str, EntryPoint]:
        found: dict[str, EntryPoint] = {}
        for entry in entry_points(group=PLUGIN_GROUP):
            found.setdefault(entry.name, entry)
        return found


REGISTRY = Registry()
_FACTORIES = "imbucket.app.backends"
# A SQL store keeps its data where its url says: nowhere for an in-memory SQLite database.
_SQL_LOCATION = "imbucket.adapters.sql.dialects:location"
REGISTRY.register(
    "memory", f"{_FACTORIES}:memory", BackendRules("buckets", persists=False, family="memory")
)
REGISTRY.register(
    "sql-row",
    f"{_FACTORIES}:sql_row",
    BackendRules("rows", locate=_SQL_LOCATION, pooled=True, asyncio_drivers=True, family="sql"),
)
REGISTRY.register(
    "sql-bucket",
    f"{_FACTORIES}:sql_bucket",
    BackendRules(
        "buckets",
        default_encoding="compact",
        locate=_SQL_LOCATION,
        pooled=True,
        asyncio_drivers=True,
        family="sql",
    ),
)
REGISTRY.register(
    "mongo-bucket",
    f"{_FACTORIES}:mongo_bucket",
    BackendRules(
        "buckets",
        encodings=("openim",),
        max_document_bytes=MONGO_MAX_DOCUMENT_BYTES,
        asyncio_drivers=True,
        family="mongo",
    ),
)
REGISTRY.register(
    "mongo-row",
    f"{_FACTORIES}:mongo_row",
    BackendRules("rows", asyncio_drivers=True, family="mongo"),
)
# OpenIM's own Redis client (its allocated seqs) would block the event loop.
REGISTRY.register(
    "openim-mongo",
    f"{_FACTORIES}:openim_mongo",
    BackendRules(
        "buckets",
        encodings=("openim",),
        max_document_bytes=MONGO_MAX_DOCUMENT_BYTES,
        asyncio=False,
        family="openim",
    ),
)


def check_store_backend(name: str) -> str:
    """The name, when it names a known store backend; else ConfigError listing the known ones."""
    REGISTRY.get(name)
    return name


@dataclass(frozen=True, slots=True)
class CacheRules:
    """What the composition root, the CLI and ``imbucket.aio`` decide for one cache backend.

    fronts: whether a cache stands in front of the store (False for ``none``: the store is
    read directly). cluster: the cache is a Redis Cluster, its url naming any node.
    asyncio: whether ``imbucket.aio`` can open it (its factory is passed ``asynchronous=True``
    then, and opens its client's asyncio mode).
    """

    fronts: bool = True
    cluster: bool = False
    asyncio: bool = True


# A cache factory (``imbucket.app.caches``): the backend, ``Settings.cache`` and the cache's
# rules, and the keyword ``asynchronous``, in; the backend the service runs on out.
CacheFactory = Callable[..., Backend]


@dataclass(frozen=True, slots=True)
class CacheRegistration:
    """One cache backend a configuration may name: its factory and its rules."""

    name: str
    target: str  # "module:function" of a CacheFactory
    rules: CacheRules

    def load(self) -> CacheFactory:
        """Import the factory (a ``CacheFactory``).

        Called as ``factory(backend, settings.cache, rules, asynchronous=...)``, it returns
        the backend behind this cache (as it is, for ``none``).
        """
        module, _, attribute = self.target.partition(":")
        factory: CacheFactory = getattr(import_module(module), attribute)
        return factory


class CacheRegistry:
    """The cache backends, in registration order (no plugins)."""

    def __init__(self) -> None:
        self._caches: dict[str, CacheRegistration] = {}

    def register(self, name: str, target: str, rules: CacheRules) -> None:
        """Add a cache backend: name, its factory as "module:function", and its rules."""
        self._caches[name] = CacheRegistration(name, target, rules)

    def names(self) -> tuple[str, ...]:
        """Every cache backend a configuration may name."""
        return tuple(self._caches)

    def get(self, name: str) -> CacheRegistration:
        """The registration of name; ConfigError listing the known names when there is none."""
        found = self._caches.get(name)
        if found is None:
            known = ", ".join(self._caches)
            raise ConfigError(f"unknown cache backend {name!r}; known: {known}")
        return found


CACHES = CacheRegistry()
_CACHE_FACTORIES = "imbucket.app.caches"
CACHES.register("none", f"{_CACHE_FACTORIES}:no_cache", CacheRules(fronts=False))
CACHES.register("redis", f"{_CACHE_FACTORIES}:redis", CacheRules())
CACHES.register("redis-cluster", f"{_CACHE_FACTORIES}:redis", CacheRules(cluster=True))


def check_cache_backend(name: str) -> str:
    """The name, when it names a cache backend; else ConfigError listing the known ones."""
    CACHES.get(name)
    return name
