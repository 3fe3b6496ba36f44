"""imbucket: a message store for instant messaging on OpenIM's bucket layout.

The public surface is what ``__all__`` lists; everything else is private and may change.
Backend authors import from :mod:`imbucket.plugin_api`; the contract suite is
:mod:`imbucket.testing`; the benchmark lab is :mod:`imbucket.bench` (the ``[bench]`` extra).

Example::

    from imbucket import Actor, Draft, open_service

    with open_service({"store": {"backend": "memory"}}) as service:
        sent = service.send("sg_team", [Draft(send_id="alice", content="hi", client_msg_id="c-1")])
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from imbucket.app import open_container, open_service
from imbucket.app.service import MessageService
from imbucket.app.settings import Settings, load_settings
from imbucket.domain.errors import (
    ConfigError,
    ContentTooLarge,
    ConversationMismatch,
    ImbucketError,
    InvalidArgument,
    InvalidMessage,
    InvalidSeq,
    LayoutMismatch,
    NotPermitted,
    OutcomeUnknown,
    SeqNotAllocated,
    StoreUnavailable,
    WriteConflict,
    WriteRefused,
)
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    Actor,
    ContentType,
    Draft,
    InsertOutcome,
    InsertResult,
    Message,
    Revoke,
    Role,
    SessionType,
    StoreStats,
    Watermarks,
)
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.ports.health import Health, Reachability

try:
    __version__ = version("imbucket")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Actor",
    "BucketLayout",
    "ConfigError",
    "ContentTooLarge",
    "ContentType",
    "ConversationMismatch",
    "Draft",
    "Health",
    "ImbucketError",
    "InsertOutcome",
    "InsertResult",
    "InvalidArgument",
    "InvalidMessage",
    "InvalidSeq",
    "LayoutMismatch",
    "Message",
    "MessageService",
    "MessageView",
    "NotPermitted",
    "OutcomeUnknown",
    "Reachability",
    "Revoke",
    "Role",
    "SeqNotAllocated",
    "SessionType",
    "Settings",
    "StoreStats",
    "StoreUnavailable",
    "Tombstone",
    "TombstoneReason",
    "Watermarks",
    "WriteConflict",
    "WriteRefused",
    "__version__",
    "load_settings",
    "open_container",
    "open_service",
]
