"""Application layer: settings, DI container, MessageService, CLI and benchmark."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.service import MessageService
from app.settings import Settings, load_settings

__all__ = ["MessageService", "Settings", "open_service"]


def open_service(config: Mapping[str, Any] | None = None) -> MessageService:
    """Build a MessageService from config merged over settings (file, then environment).

    Example: ``open_service({"store": {"backend": "sql-bucket", "url": "sqlite://"}})``.
    """
    from app.container import Container

    container = Container()
    container.config.from_dict(load_settings(config).model_dump())
    service: MessageService = container.service()
    return service
