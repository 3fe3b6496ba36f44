"""Which backends a benchmark run covers: ``ID[+redis][@URL]`` strings or a config file.

Examples: ``memory``, ``memory+redis``, ``sql-row@sqlite:///bench.db``,
``sql-bucket+redis@postgresql+psycopg://postgres@127.0.0.1:5432/test``. The cache goes before
the ``@`` because SQLAlchemy URLs contain ``+`` themselves; the Redis URL comes from
``--redis-url`` (or the config file), the settings' ``cache.url`` by default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from imbucket.app.registry import CACHES, REGISTRY
from imbucket.app.settings import load_settings
from imbucket.bench.traffic import Traffic, parse_traffic, read_document
from imbucket.bench.workloads import WORKLOAD_NAMES
from imbucket.domain.budget import DEFAULT_MAX_BUCKET_BYTES
from imbucket.domain.errors import ConfigError
from imbucket.domain.layout import ENCODINGS

DEFAULT_BACKENDS = ("memory", "sql-row", "sql-bucket", "sql-bucket:openim")
"""The embedded default; the SQL ones run on an SQLite file in a temporary folder.

sql-bucket runs twice: in its default, compact encoding and in OpenIM's (every slot written
out with named fields), so the report shows what the encoding costs."""


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """One backend to benchmark: a store id, its URL, and an optional cache in front."""

    store: str
    url: str = ""
    cache: str = "none"
    cache_url: str = ""
    flavour: str = ""  # the engine as the server names itself (mariadb behind a mysql:// URL)
    bucket_size: int | None = None  # slots per bucket; None: the settings' default (100)
    encoding: str | None = None  # bucket encoding; None: the backend's default (compact on SQL)

    @property
    def engine(self) -> str:
        """The engine under the store: memory, sqlite, postgresql, mysql, mongodb, …."""
        if self.flavour:
            return self.flavour
        if not self.url:
            return "memory" if self.store == "memory" else "sqlite"
        scheme = self.url.split(":", 1)[0].split("+", 1)[0].lower()
        return {"postgres": "postgresql", "mariadb": "mysql", "mongodb+srv": "mongodb"}.get(
            scheme, scheme
        )

    @property
    def layout(self) -> str:
        """``bucket`` or ``row`` (memory stores buckets), as the registry says."""
        return "row" if REGISTRY.get(self.store).rules.layout == "rows" else "bucket"

    @property
    def family(self) -> str:
        """Stores of one family differ only in layout (``sql``, ``mongo``, …), as registered."""
        return REGISTRY.get(self.store).rules.family

    @property
    def label(self) -> str:
        """Short unique name shown in the report, e.g. ``sql-row/postgresql+redis``."""
        engine = "" if self.store == "memory" else f"/{self.engine}"
        cache = "" if self.cache == "none" else f"+{self.cache}"
        size = "" if self.bucket_size is None else f"[{self.bucket_size}]"
        encoding = "" if self.encoding is None else f"[{self.encoding}]"
        return f"{self.store}{engine}{cache}{size}{encoding}"

    def config(self) -> dict[str, Any]:
        """The ``open_service`` config of this backend."""
        cache: dict[str, Any] = {"backend": self.cache}
        if self.cache_url:
            cache["url"] = self.cache_url
        store: dict[str, Any] = {"backend": self.store, "url": self.url}
        if self.encoding is not None:
            store["bucket_encoding"] = self.encoding
        if self.bucket_size is not None:
            store["bucket_size"] = self.bucket_size
            # The same worst-case bytes per slot as OpenIM's 100 slots in 8 MiB.
            scaled = -(-DEFAULT_MAX_BUCKET_BYTES * self.bucket_size // 100)
            store["max_bucket_bytes"] = max(DEFAULT_MAX_BUCKET_BYTES, scaled)
        return {"store": store, "cache": cache}


_SPEC = re.compile(
    r"^(?P<store>[a-z-]+)(?::(?P<encoding>[a-z]+))?(?:\+(?P<cache>[a-z-]+))?(?:@(?P<url>.+))?$"
)


def parse_backend(text: str, cache_url: str = "") -> BackendSpec:
    """Parse ``ID[:ENCODING][+redis|+redis-cluster][@URL]``; ConfigError on unknown ids."""
    match = _SPEC.match(text.strip())
    if match is None:
        raise ConfigError(f"backend {text!r} is not of the form ID[:ENCODING][+redis][@URL]")
    spec = _spec(match["store"], match["url"] or "", match["cache"] or "none", cache_url)
    encoding = match["encoding"]
    if encoding is None:
        return spec
    if encoding not in ENCODINGS or spec.layout != "bucket" or spec.store == "memory":
        raise ConfigError(
            f"backend {text!r}: an encoding ({', '.join(ENCODINGS)}) goes with a bucket store"
        )
    return replace(spec, encoding=encoding)


def _spec(store: str, url: str, cache: str, cache_url: str) -> BackendSpec:
    builtins = REGISTRY.builtins()  # the lab measures the built-in backends only
    if store not in builtins:
        raise ConfigError(f"unknown store backend {store!r}; known: {', '.join(builtins)}")
    fronts = CACHES.get(cache).rules.fronts
    if fronts and not cache_url:
        cache_url = load_settings().cache.url
    return BackendSpec(store, url, cache, cache_url if fronts else "")


MAX_SWEEP_SIZES = 12
"""Most bucket sizes one sweep runs (each size runs every bucket backend once more)."""


def parse_sizes(text: str | Sequence[object]) -> tuple[int, ...]:
    """Bucket sizes of a sweep from ``20,50,100`` (or a list): distinct, ascending, ≥ 1.

    ConfigError on anything else; the stores refuse sizes their budget cannot hold
    when they open (that backend is then skipped with the reason).
    """
    items = text.split(",") if isinstance(text, str) else list(text)
    sizes: set[int] = set()
    for item in items:
        value = item.strip() if isinstance(item, str) else item
        if isinstance(value, bool):
            raise ConfigError(f"bucket size {item!r} is not a whole number")
        try:
            size = int(value) if isinstance(value, str | int) else None
        except ValueError:
            size = None
        if size is None or size < 1:
            raise ConfigError(f"bucket size {item!r} is not a whole number ≥ 1")
        sizes.add(size)
    if not sizes:
        raise ConfigError("--bucket-size needs at least one size, e.g. 20,50,100,200,500")
    if len(sizes) > MAX_SWEEP_SIZES:
        raise ConfigError(f"a sweep runs at most {MAX_SWEEP_SIZES} bucket sizes")
    return tuple(sorted(sizes))


def sweep(specs: Sequence[BackendSpec], sizes: Sequence[int]) -> list[BackendSpec]:
    """Every bucket backend once per size (in the order given), row backends once."""
    expanded: list[BackendSpec] = []
    for spec in specs:
        if spec.layout == "bucket":
            expanded += [replace(spec, bucket_size=size) for size in sizes]
        else:
            expanded.append(spec)
    return expanded


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What a config file may set: backends, scale, seed, bucket sizes and the traffic."""

    backends: tuple[BackendSpec, ...]
    scale: str | None = None
    seed: int | None = None
    bucket_sizes: tuple[int, ...] = ()
    traffic: Traffic | None = None


def load_config(path: Path, cache_url: str = "") -> BenchConfig:
    """Read a TOML or JSON bench config file.

    ``backends`` is a list of ``ID[+redis][@URL]`` strings or of tables with keys
    ``store``, ``url``, ``cache`` and ``cache_url`` (empty or absent: the embedded default);
    ``scale``, ``seed``, ``redis_url``, ``bucket_sizes`` (a list) and a ``[traffic]`` table
    (imbucket.bench.traffic) are optional.
    """
    data = read_document(path, "bench config")
    if not isinstance(data, dict) or not isinstance(data.get("backends", []), list):
        raise ConfigError(f"{path}: 'backends' must be a list")
    cache_url = str(data.get("redis_url", cache_url))
    specs = []
    for item in data.get("backends", []):
        if isinstance(item, str):
            specs.append(parse_backend(item, cache_url))
        elif isinstance(item, dict) and isinstance(item.get("store"), str):
            specs.append(
                _spec(
                    item["store"],
                    str(item.get("url", "")),
                    str(item.get("cache", "none")),
                    str(item.get("cache_url", cache_url)),
                )
            )
        else:
            raise ConfigError(f"{path}: cannot read backend entry {item!r}")
    scale, seed, sizes = data.get("scale"), data.get("seed"), data.get("bucket_sizes")
    traffic = data.get("traffic")
    return BenchConfig(
        tuple(specs),
        None if scale is None else str(scale),
        None if seed is None else int(seed),
        () if sizes is None else parse_sizes(sizes if isinstance(sizes, list) else str(sizes)),
        None if traffic is None else parse_traffic(traffic, str(path), WORKLOAD_NAMES),
    )


def redact(url: str) -> str:
    """The URL with any password masked, for reports."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)
