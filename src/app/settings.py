"""Settings: defaults < file named by IMBUCKET_CONFIG < environment (IMBUCKET_…) < overrides."""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from imbucket.adapters.timeouts import (
    DEFAULT_CACHE_SECONDS,
    DEFAULT_CACHE_STALENESS_SECONDS,
    DEFAULT_CACHE_TTL_SECONDS,
    DEFAULT_CACHE_WARNING_SECONDS,
    DEFAULT_CONNECT_SECONDS,
    DEFAULT_MAX_OVERFLOW,
    DEFAULT_POOL_SECONDS,
    DEFAULT_POOL_SIZE,
    DEFAULT_STATEMENT_SECONDS,
)
from imbucket.app.registry import CACHES, REGISTRY, check_cache_backend, check_store_backend
from imbucket.app.service import DEFAULT_CLAIM_RETENTION_SECONDS
from imbucket.domain.budget import (
    DEFAULT_MAX_BUCKET_BYTES,
    DEFAULT_MAX_DELETERS_PER_SLOT,
    MAX_DELETERS_PER_SLOT,
    BucketBounds,
)
from imbucket.domain.errors import ConfigError
from imbucket.domain.layout import DEFAULT_BUCKET_SIZE, Encoding
from imbucket.domain.model import Limits

# A built-in backend or the name of an ``imbucket.backends`` entry point (docs/plugins.md);
# an unknown name is a ConfigError listing the known ones.
StoreBackend = Annotated[str, AfterValidator(check_store_backend)]
# A cache backend of the registry (``CACHES``); another name is a ConfigError listing them.
CacheBackend = Annotated[str, AfterValidator(check_cache_backend)]
ENV_PREFIX = "IMBUCKET_"


class StoreSettings(BaseModel):
    """Which MessageStore to open, where, and how its buckets are laid out and bounded."""

    model_config = ConfigDict(extra="forbid")

    backend: StoreBackend = Field(
        default="memory",
        description="The store: a built-in backend id (`imbucket backends` lists them) or the "
        "name of an `imbucket.backends` entry point; an unknown name is a `ConfigError` "
        "listing the known ones.",
    )
    url: str = Field(
        default="",
        description="Engine URL: a SQLAlchemy URL for sql-row and sql-bucket "
        "(`sqlite:////abs/path.db`, `postgresql+psycopg://user@host:5432/db`, "
        "`mysql+pymysql://user@host:3306/db`), `mongodb://host:27017/db` for mongo-row and "
        "mongo-bucket; empty for memory, and for SQLite in memory.",
    )
    bucket_size: int = Field(
        default=DEFAULT_BUCKET_SIZE,
        ge=1,
        le=10_000,
        description="Slots per bucket. Recorded by a store when created; reopening it with "
        "another size is a `LayoutMismatch`.",
    )
    # How bucket slots are written (docs/buckets.md, "Encodings"): "compact" or "openim";
    # unset, each bucket backend writes its default (sql-bucket compact, mongo-bucket openim).
    bucket_encoding: Encoding | None = Field(
        default=None,
        description="How bucket slots are written: `compact` (only what differs from an "
        "empty slot, short keys) or `openim` (OpenIM's named fields in every slot). Unset: "
        "sql-bucket writes compact, mongo-bucket openim. Recorded when a store is created; "
        "reopening with the other is a `LayoutMismatch`.",
    )
    # Deleters a slot keeps inline; further ones spill to a side table (docs/buckets.md).
    max_deleters_per_slot: int = Field(
        default=DEFAULT_MAX_DELETERS_PER_SLOT,
        ge=1,
        le=MAX_DELETERS_PER_SLOT,
        description="Delete-for-me user ids kept inline in a bucket slot; further ones spill "
        "to a side table that reads merge.",
    )
    # No bucket grows beyond this many bytes as stored; checked against the limits at load.
    max_bucket_bytes: int = Field(
        default=DEFAULT_MAX_BUCKET_BYTES,
        ge=1,
        description="Size no bucket may exceed as stored; settings that cannot guarantee it "
        "(bucket size, limits, inline deleters) are a `ConfigError` at load. At most 16 MiB "
        "on mongo-bucket.",
    )
    # Every wait of a store call is bounded (docs/faults.md); the defaults keep every call,
    # retries included, within 30 s.
    connect_timeout_seconds: float = Field(
        default=DEFAULT_CONNECT_SECONDS,
        gt=0,
        le=3600,
        description="Longest wait to open a connection (PostgreSQL rounds below 2 s up to 2 s).",
    )
    statement_timeout_seconds: float = Field(
        default=DEFAULT_STATEMENT_SECONDS,
        gt=0,
        le=3600,
        description="Longest wait for the reply to one statement or command on an open "
        "connection (PostgreSQL: a client-side watchdog; SQLite: the busy timeout).",
    )
    pool_timeout_seconds: float = Field(
        default=DEFAULT_POOL_SECONDS,
        gt=0,
        le=3600,
        description="Longest wait for a free pooled connection. With the default timeouts "
        "every call, retries included, answers within 30 s.",
    )
    reconnect_timeout_seconds: float = Field(
        default=0,
        ge=0,
        le=3600,
        description="SQL stores: how long a call keeps reconnecting while no server accepts "
        "(a failover to a new primary); 0 tries only a few times (docs/faults.md).",
    )
    # SQL stores: connections kept open per service, and how many more it may open under load
    # (closed again when returned). Neither applies to SQLite or MongoDB (docs/sql.md).
    pool_size: int = Field(
        default=DEFAULT_POOL_SIZE,
        ge=1,
        le=1000,
        description="PostgreSQL and MariaDB: connections a service keeps open.",
    )
    max_overflow: int = Field(
        default=DEFAULT_MAX_OVERFLOW,
        ge=0,
        le=1000,
        description="PostgreSQL and MariaDB: connections a service may open beyond "
        "`pool_size` under load, closed when returned.",
    )
    # How long send remembers a client_msg_id (docs/sending.md).
    send_claim_retention_seconds: int = Field(
        default=DEFAULT_CLAIM_RETENTION_SECONDS,
        ge=60,
        description="How long `send` remembers a client_msg_id: a retry within it gets the "
        "stored message back, a retry after it is a new message.",
    )


class CacheSettings(BaseModel):
    """Optional Redis read cache in front of the store (redis-cluster: url names any node)."""

    model_config = ConfigDict(extra="forbid")

    backend: CacheBackend = Field(
        default="none",
        json_schema_extra={"choices": list(CACHES.names())},
        description="`redis` puts the Redis read cache in front of the store, `redis-cluster` "
        "puts it on a Redis Cluster; `none` reads the store directly.",
    )
    url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis URL; for `redis-cluster` any node of the cluster (`redis://host:port`).",
    )
    ttl_seconds: int = Field(
        default=DEFAULT_CACHE_TTL_SECONDS, ge=1, description="Cache entry lifetime."
    )
    key_prefix: str = Field(
        default="imbucket",
        description="Prefix of every cache key. A store records the cache that fronts it; "
        "opening it with another prefix is a `CacheMismatch`.",
    )
    # A slow cache is skipped, never waited for (docs/redis.md).
    connect_timeout_seconds: float = Field(
        default=DEFAULT_CACHE_SECONDS,
        gt=0,
        le=60,
        description="Longest wait to connect to Redis; then the cache is skipped.",
    )
    socket_timeout_seconds: float = Field(
        default=DEFAULT_CACHE_SECONDS,
        gt=0,
        le=60,
        description="Longest wait for a Redis reply; then the cache is skipped.",
    )
    staleness_seconds: float = Field(
        default=DEFAULT_CACHE_STALENESS_SECONDS,
        ge=0.05,
        le=3600,
        description="Longest time a write whose writer could not reach Redis may still be "
        "served stale from the cache by other processes: each process reads the store's "
        "invalidation log at most this often and replays it before serving.",
    )
    warning_interval_seconds: float = Field(
        default=DEFAULT_CACHE_WARNING_SECONDS,
        gt=0,
        le=3600,
        description="While Redis cannot be reached (or does not hold this store's binding), "
        "a warning is logged when that starts and again this often until it is fixed.",
    )


class LimitsSettings(BaseModel):
    """Input limits enforced before anything is written."""

    model_config = ConfigDict(extra="forbid")

    max_id_length: int = Field(
        default=200, ge=1, le=1000, description="Longest id accepted, in characters."
    )
    max_content_bytes: int = Field(
        default=64 * 1024,
        ge=1,
        description="Largest message content (and `ex`) accepted, in UTF-8 bytes.",
    )
    max_seqs_per_call: int = Field(
        default=1000, ge=1, description="Most seqs (or messages) one call may address."
    )
    max_message_bytes: int = Field(
        default=70 * 1024,
        ge=1,
        description="Largest whole message (content, ex, ids, options) accepted.",
    )


class ServiceSettings(BaseModel):
    """How the service runs its use cases over the store."""

    model_config = ConfigDict(extra="forbid")

    coalesce_pulls: bool = Field(
        default=True,
        description="SQL stores without a cache: concurrent pulls of one conversation with "
        "the same seqs (a group's members pulling its newest message) share one store read; "
        'each pull still gets exactly its own answer (docs/sql.md, "Coalesced pulls").',
    )


class Settings(BaseSettings):
    """All of imbucket's configuration."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid"
    )

    store: StoreSettings = StoreSettings()
    cache: CacheSettings = CacheSettings()
    limits: LimitsSettings = LimitsSettings()
    service: ServiceSettings = ServiceSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init kwargs win over the environment, which wins over the IMBUCKET_CONFIG file."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get("IMBUCKET_CONFIG")
        if path:
            sources.append(_file_source(settings_cls, Path(path)))
        return tuple(sources)


def _file_source(settings_cls: type[BaseSettings], path: Path) -> PydanticBaseSettingsSource:
    if not path.is_file():
        raise ConfigError(f"IMBUCKET_CONFIG names {path}, which is not a file")
    if path.suffix == ".toml":
        return TomlConfigSettingsSource(settings_cls, toml_file=path)
    if path.suffix == ".json":
        return JsonConfigSettingsSource(settings_cls, json_file=path)
    raise ConfigError(f"IMBUCKET_CONFIG must be a .toml or .json file, got {path}")


def read_config_file(path: Path | str) -> dict[str, Any]:
    """A settings dict from a TOML or JSON file; ConfigError naming any unknown key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} is not a file")
    try:
        if path.suffix == ".toml":
            loaded: Any = tomllib.loads(path.read_text())
        elif path.suffix == ".json":
            loaded = json.loads(path.read_text())
        else:
            raise ConfigError(f"a settings file must be a .toml or .json file, got {path}")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    check_keys(loaded, f" in {path}")
    return loaded


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """Settings from file and environment, with overrides merged on top (nested keys merge).

    An unknown key at any level of any source is a ConfigError naming it and the closest
    known one; so is an ``IMBUCKET_…__…`` environment variable that names no setting.
    """
    path = os.environ.get("IMBUCKET_CONFIG")
    if path:
        read_config_file(path)
    _check_environment(os.environ)
    check_keys(overrides or {}, "")
    try:
        base = Settings().model_dump()
        settings = Settings(**_merge(base, dict(overrides or {})))
    except ValidationError as error:
        raise ConfigError(_invalid(error)) from None
    check_backend_rules(settings)
    return settings


def check_backend_rules(settings: Settings) -> None:
    """ConfigError when settings break a rule of the selected backend (its registration).

    A bucket backend gets the bucket arithmetic checked and, with a largest document, a
    bucket bound that fits it; one that writes some bucket encodings only refuses the others.
    A plugin's layout is known once its store is opened: the composition root checks it then.
    """
    store = settings.store
    rules = REGISTRY.get(store.backend).rules
    if store.bucket_encoding is not None and store.bucket_encoding not in rules.encodings:
        raise ConfigError(
            f"{store.backend} writes the bucket encoding {' or '.join(map(repr, rules.encodings))}"
            f" only, not {store.bucket_encoding!r}: set store.bucket_encoding = "
            f'"{rules.default_encoding}" or leave it unset'
        )
    if rules.layout != "buckets":
        return
    bucket_bounds(settings).check()
    limit = rules.max_document_bytes
    if limit is not None and store.max_bucket_bytes > limit:
        raise ConfigError(
            f"store.max_bucket_bytes = {store.max_bucket_bytes} is above {store.backend}'s "
            f"document limit of {limit} bytes"
        )


def check_keys(config: Mapping[str, Any], where: str) -> None:
    """ConfigError for the first key of config, at any depth, that names no setting.

    where: how the message says where the key came from (" in settings.toml").
    """
    _check_level(config, Settings, "", where)


def _check_level(
    config: Mapping[str, Any], model: type[BaseModel], prefix: str, where: str
) -> None:
    fields = model.model_fields
    for key, value in config.items():
        if key not in fields:
            hint = _closest(str(key), fields)
            known = f"did you mean {prefix + hint!r}?" if hint else f"known: {', '.join(fields)}"
            raise ConfigError(f"unknown setting {prefix + str(key)!r}{where}; {known}")
        section = _section(model, key)
        if section is not None and isinstance(value, Mapping):
            _check_level(value, section, f"{prefix}{key}.", where)


def _check_environment(environ: Mapping[str, str]) -> None:
    """ConfigError for an IMBUCKET_<SECTION>__<KEY> variable that names no setting.

    Only names with the ``__`` nesting delimiter are checked: other IMBUCKET_ variables
    (IMBUCKET_CONFIG, the test suite's) are not settings.
    """
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and "__" in upper[len(ENV_PREFIX) :]:
            fault = _env_fault(upper[len(ENV_PREFIX) :].lower().split("__"))
            if fault:
                raise ConfigError(f"environment variable {name} names no setting ({fault})")


def _env_fault(parts: list[str]) -> str:
    """Why the path parts (store, bucket_size) name no setting, with a fix; "" if they do."""
    model: type[BaseModel] = Settings
    for depth, part in enumerate(parts):
        fields = model.model_fields
        dotted = ".".join(parts[: depth + 1])
        last = depth == len(parts) - 1
        if part not in fields:
            hint = _closest(part, fields)
            fixed = "__".join([*parts[:depth], hint, *parts[depth + 1 :]]) if hint else ""
            return f"{dotted!r} is unknown" + (
                f"; did you mean {ENV_PREFIX}{fixed.upper()}?" if fixed else ""
            )
        section = _section(model, part)
        if section is None and not last:
            fixed = "__".join(parts[: depth + 1]).upper()
            return f"{dotted!r} is a value, not a section; did you mean {ENV_PREFIX}{fixed}?"
        if section is None:
            return ""
        model = section
    return ""  # a whole section (IMBUCKET_STORE) is JSON, checked when it is parsed


def _section(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    """The settings model of a section field (store, cache, limits), None for a value."""
    annotation = model.model_fields[key].annotation
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _closest(key: str, known: Mapping[str, Any]) -> str | None:
    """The known name most like key, or one that key abbreviates (ttl: ttl_seconds)."""
    found = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    found += [name for name in known if key and name.startswith(key)]
    return found[0] if found else None


def _unknown(loc: tuple[int | str, ...]) -> str:
    """The message of an unknown key at loc (a path into Settings), with the closest one."""
    model: type[BaseModel] = Settings
    for part in loc[:-1]:
        section = _section(model, str(part)) if str(part) in model.model_fields else None
        if section is None:
            break
        model = section
    path = ".".join(str(part) for part in loc)
    hint = _closest(str(loc[-1]), model.model_fields)
    prefix = "".join(f"{part}." for part in loc[:-1])
    return f"unknown setting {path!r}" + (f"; did you mean {prefix + hint!r}?" if hint else "")


def _invalid(error: ValidationError) -> str:
    """One line per fault; an unknown key names the closest known one."""
    lines = []
    for fault in error.errors():
        path = ".".join(str(part) for part in fault["loc"])
        if fault["type"] == "extra_forbidden":
            lines.append(_unknown(fault["loc"]))
        else:
            lines.append(f"{path}: {fault['msg']}")
    return "invalid configuration: " + "; ".join(lines)


def limits_of(settings: Settings) -> Limits:
    """The input limits of settings."""
    limits = settings.limits
    return Limits(
        max_id_length=limits.max_id_length,
        max_content_bytes=limits.max_content_bytes,
        max_seqs_per_call=limits.max_seqs_per_call,
        max_message_bytes=limits.max_message_bytes,
    )


def bucket_bounds(settings: Settings) -> BucketBounds:
    """The worst-case bucket arithmetic of settings.

    The one place the bucket budget is computed: load_settings checks it, the container
    hands ``bucket_bounds(settings).budget()`` to the bucket stores (docs/buckets.md).
    """
    store = settings.store
    return BucketBounds.of(
        store.bucket_size, limits_of(settings), store.max_deleters_per_slot, store.max_bucket_bytes
    )


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
