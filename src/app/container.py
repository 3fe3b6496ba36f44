"""Dependency-injector container: picks adapters from config without touching unselected ones.

Backend factories live in ``app.backends`` and import their drivers only when called, so a
configuration naming ``memory`` never imports pymongo or connects anywhere.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from app import backends
from app.service import MessageService
from domain.budget import BucketBounds, TagBudget
from domain.layout import BucketLayout
from domain.model import Limits


def _backend_selector(
    config: providers.Configuration,
    layout: providers.Provider[BucketLayout],
    budget: providers.Provider[TagBudget],
) -> providers.Selector[backends.Backend]:
    choices = {
        name: providers.Singleton(factory, url=config.store.url, layout=layout, budget=budget)
        for name, factory in backends.STORE_FACTORIES.items()
    }
    return providers.Selector(config.store.backend, **choices)


def _budget(
    layout: BucketLayout, limits: Limits, deleters_per_slot: int, max_bucket_bytes: int
) -> TagBudget:
    return BucketBounds.of(layout.size, limits, deleters_per_slot, max_bucket_bytes).budget()


class Container(containers.DeclarativeContainer):
    """Wires MessageService from a config dict shaped like ``app.settings.Settings``."""

    config = providers.Configuration(strict=True)

    layout = providers.Singleton(BucketLayout, size=config.store.bucket_size)
    limits = providers.Singleton(
        Limits,
        max_id_length=config.limits.max_id_length,
        max_content_bytes=config.limits.max_content_bytes,
        max_seqs_per_call=config.limits.max_seqs_per_call,
        max_message_bytes=config.limits.max_message_bytes,
    )
    budget = providers.Singleton(
        _budget,
        layout=layout,
        limits=limits,
        deleters_per_slot=config.store.max_deleters_per_slot,
        max_bucket_bytes=config.store.max_bucket_bytes,
    )

    backend = _backend_selector(config, layout, budget)
    store = providers.Selector(
        config.cache.backend,
        none=providers.Callable(backends.store_of, backend),
        redis=providers.Singleton(
            backends.redis_cached_store,
            backend=backend,
            url=config.cache.url,
            ttl_seconds=config.cache.ttl_seconds,
            key_prefix=config.cache.key_prefix,
        ),
        **{
            "redis-cluster": providers.Singleton(
                backends.redis_cached_store,
                backend=backend,
                url=config.cache.url,
                ttl_seconds=config.cache.ttl_seconds,
                key_prefix=config.cache.key_prefix,
                cluster=True,
            )
        },
    )
    seqs = providers.Callable(backends.seqs_of, backend)
    version = providers.Callable(backends.version_of, backend)

    service = providers.Singleton(MessageService, store=store, seqs=seqs, limits=limits)
