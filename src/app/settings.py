"""Settings: defaults < file named by IMBUCKET_CONFIG < environment (IMBUCKET_…) < overrides."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    JsonConfigSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from domain.budget import (
    DEFAULT_MAX_BUCKET_BYTES,
    DEFAULT_MAX_DELETERS_PER_SLOT,
    MAX_DELETERS_PER_SLOT,
    BucketBounds,
)
from domain.errors import ConfigError
from domain.model import Limits

StoreBackend = Literal["memory", "sql-row", "sql-bucket", "mongo-bucket", "mongo-row"]
CacheBackend = Literal["none", "redis", "redis-cluster"]
STORE_BACKENDS: tuple[str, ...] = get_args(StoreBackend)
CACHE_BACKENDS: tuple[str, ...] = get_args(CacheBackend)
BUCKET_BACKENDS = ("memory", "sql-bucket", "mongo-bucket")


class StoreSettings(BaseModel):
    """Which MessageStore to open, where, and how its buckets are laid out and bounded."""

    backend: StoreBackend = "memory"
    url: str = ""
    bucket_size: int = Field(default=100, ge=1, le=10_000)
    # Deleters a slot keeps inline; further ones spill to a side table (docs/buckets.md).
    max_deleters_per_slot: int = Field(
        default=DEFAULT_MAX_DELETERS_PER_SLOT, ge=1, le=MAX_DELETERS_PER_SLOT
    )
    # No bucket grows beyond this many bytes as stored; checked against the limits at load.
    max_bucket_bytes: int = Field(default=DEFAULT_MAX_BUCKET_BYTES, ge=1)


class CacheSettings(BaseModel):
    """Optional Redis read cache in front of the store (redis-cluster: url names any node)."""

    backend: CacheBackend = "none"
    url: str = "redis://127.0.0.1:6379/0"
    ttl_seconds: int = Field(default=24 * 3600, ge=1)
    key_prefix: str = "imbucket"


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
        bucket_bounds(settings).check()
    return settings


def bucket_bounds(settings: Settings) -> BucketBounds:
    """The worst-case bucket arithmetic of these settings (docs/buckets.md)."""
    store, limits = settings.store, settings.limits
    return BucketBounds.of(
        store.bucket_size,
        Limits(**limits.model_dump()),
        store.max_deleters_per_slot,
        store.max_bucket_bytes,
    )


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
