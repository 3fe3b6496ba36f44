"""Settings: defaults < file named by IMBUCKET_CONFIG < environment (IMBUCKET_…) < overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from imbucket.adapters.timeouts import (
    DEFAULT_CACHE_SECONDS,
    DEFAULT_CONNECT_SECONDS,
    DEFAULT_POOL_SECONDS,
    DEFAULT_STATEMENT_SECONDS,
)
from imbucket.app.backends import STORE_FACTORIES, check_store_backend
from imbucket.app.service import DEFAULT_CLAIM_RETENTION_SECONDS
from imbucket.domain.budget import (
    DEFAULT_MAX_BUCKET_BYTES,
    DEFAULT_MAX_DELETERS_PER_SLOT,
    MAX_DELETERS_PER_SLOT,
    BucketBounds,
    TagBudget,
)
from imbucket.domain.errors import ConfigError
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import Limits

# A built-in backend or the name of an ``imbucket.backends`` entry point (docs/plugins.md);
# an unknown name is a ConfigError listing the known ones.
StoreBackend = Annotated[str, AfterValidator(check_store_backend)]
CacheBackend = Literal["none", "redis", "redis-cluster"]
STORE_BACKENDS: tuple[str, ...] = tuple(STORE_FACTORIES)  # the built-in ones
CACHE_BACKENDS: tuple[str, ...] = get_args(CacheBackend)
BUCKET_BACKENDS = ("memory", "sql-bucket", "mongo-bucket")
# MongoDB's largest document (maxBsonObjectSize): a bucket, and a write carrying a bucket's
# messages, must fit it.
MONGO_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024


class StoreSettings(BaseModel):
    """Which MessageStore to open, where, and how its buckets are laid out and bounded."""

    backend: StoreBackend = "memory"
    url: str = ""
    bucket_size: int = Field(default=100, ge=1, le=10_000)
    # How bucket slots are written (docs/buckets.md, "Encodings"): "compact" or "openim";
    # unset, each bucket backend writes its default (sql-bucket compact, mongo-bucket openim).
    bucket_encoding: Literal["compact", "openim"] | None = None
    # Deleters a slot keeps inline; further ones spill to a side table (docs/buckets.md).
    max_deleters_per_slot: int = Field(
        default=DEFAULT_MAX_DELETERS_PER_SLOT, ge=1, le=MAX_DELETERS_PER_SLOT
    )
    # No bucket grows beyond this many bytes as stored; checked against the limits at load.
    max_bucket_bytes: int = Field(default=DEFAULT_MAX_BUCKET_BYTES, ge=1)
    # Every wait of a store call is bounded (docs/faults.md); the defaults keep every call,
    # retries included, within 30 s.
    connect_timeout_seconds: float = Field(default=DEFAULT_CONNECT_SECONDS, gt=0, le=3600)
    statement_timeout_seconds: float = Field(default=DEFAULT_STATEMENT_SECONDS, gt=0, le=3600)
    pool_timeout_seconds: float = Field(default=DEFAULT_POOL_SECONDS, gt=0, le=3600)
    # How long send remembers a client_msg_id (docs/sending.md).
    send_claim_retention_seconds: int = Field(default=DEFAULT_CLAIM_RETENTION_SECONDS, ge=60)


class CacheSettings(BaseModel):
    """Optional Redis read cache in front of the store (redis-cluster: url names any node)."""

    backend: CacheBackend = "none"
    url: str = "redis://127.0.0.1:6379/0"
    ttl_seconds: int = Field(default=24 * 3600, ge=1)
    key_prefix: str = "imbucket"
    # A slow cache is skipped, never waited for (docs/redis.md).
    connect_timeout_seconds: float = Field(default=DEFAULT_CACHE_SECONDS, gt=0, le=60)
    socket_timeout_seconds: float = Field(default=DEFAULT_CACHE_SECONDS, gt=0, le=60)


class LimitsSettings(BaseModel):
    """Input limits enforced before anything is written."""

    max_id_length: int = Field(default=200, ge=1, le=1000)
    max_content_bytes: int = Field(default=64 * 1024, ge=1)
    max_seqs_per_call: int = Field(default=1000, ge=1)
    max_message_bytes: int = Field(default=70 * 1024, ge=1)


class Settings(BaseSettings):
    """All of imbucket's configuration."""

    model_config = SettingsConfigDict(
        env_prefix="IMBUCKET_", env_nested_delimiter="__", extra="forbid"
    )

    store: StoreSettings = StoreSettings()
    cache: CacheSettings = CacheSettings()
    limits: LimitsSettings = LimitsSettings()

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


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """Settings from file and environment, with overrides merged on top (nested keys merge)."""
    try:
        base = Settings().model_dump()
        settings = Settings(**_merge(base, dict(overrides or {})))
    except ValidationError as error:
        raise ConfigError(f"invalid configuration: {error}") from None
    if settings.store.backend in BUCKET_BACKENDS:
        bucket_bounds(settings.model_dump()).check()
    store = settings.store
    if store.backend == "mongo-bucket" and store.max_bucket_bytes > MONGO_MAX_DOCUMENT_BYTES:
        raise ConfigError(
            f"store.max_bucket_bytes = {store.max_bucket_bytes} is above MongoDB's document "
            f"limit of {MONGO_MAX_DOCUMENT_BYTES} bytes"
        )
    return settings


def limits_of(config: Mapping[str, Any]) -> Limits:
    """The input limits of a configuration shaped like Settings (its model_dump())."""
    return Limits(**config["limits"])


def bucket_bounds(config: Mapping[str, Any]) -> BucketBounds:
    """The worst-case bucket arithmetic of a configuration shaped like Settings.

    The one place the bucket budget is computed: load_settings checks it, the container
    hands ``bucket_bounds(config).budget()`` to the bucket stores (docs/buckets.md).
    """
    store = config["store"]
    return BucketBounds.of(
        store["bucket_size"],
        limits_of(config),
        store["max_deleters_per_slot"],
        store["max_bucket_bytes"],
    )


# The bucket encoding a backend writes when store.bucket_encoding is unset.
DEFAULT_ENCODINGS = {"sql-bucket": "compact"}


def layout_of(config: Mapping[str, Any]) -> BucketLayout:
    """The bucket layout of a configuration shaped like Settings: size and encoding."""
    store = config["store"]
    encoding = store.get("bucket_encoding") or DEFAULT_ENCODINGS.get(store["backend"], "openim")
    return BucketLayout(store["bucket_size"], encoding)


def tag_budget(config: Mapping[str, Any]) -> TagBudget:
    """The inline limits the bucket stores enforce under a configuration."""
    return bucket_bounds(config).budget()


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
