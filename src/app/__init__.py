"""Application layer: settings, DI container, MessageService, CLI and benchmark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from imbucket.app.service import MessageService
from imbucket.app.settings import Settings, load_settings

if TYPE_CHECKING:
    from imbucket.app.container import Container

__all__ = ["MessageService", "Settings", "open_container", "open_service"]


def open_service(config: Mapping[str, Any] | None = None) -> MessageService:
    """Build a MessageService from config merged over settings (file, then environment).

    Example: ``open_service({"store": {"backend": "sql-bucket", "url": "sqlite://"}})``.
    """
    service: MessageService = open_container(config).service()
    return service


def open_container(config: Mapping[str, Any] | None = None) -> Container:
    """The configured DI container, for callers that need more than the service.

    config is merged over file and environment settings (``load_settings``); the container
    gets the typed ``Settings`` (its ``settings`` provider).
    """
    from dependency_injector import providers

    from imbucket.app.container import Container

    return Container(settings=providers.Object(load_settings(config)))
