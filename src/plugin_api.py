"""Everything a third-party store backend needs, in one module: the plugin API.

A backend lives in a package of its own, registers a factory under the entry point group
``imbucket.backends`` and is selected by ``store.backend = "NAME"`` like a built-in backend
(docs/plugins.md walks through it; ``examples/imbucket-example-store`` is a worked example that
imports from this module only). What this module exports is the stable plugin API; other
``imbucket.*`` modules are private and may change.

The factory (``StoreFactory``)::

    def open_backend(
        url: str, layout: BucketLayout, budget: TagBudget, timeouts: Timeouts
    ) -> Backend: ...

- ``url`` is ``store.url`` verbatim; ``timeouts`` bounds every wait of a store call
  (connect, statement, pool); ``layout`` is the bucket size and encoding ("compact" or
  "openim": how the built-in stores spell a slot; yours may ignore it, or refuse the one it
  does not write with ``ConfigError``); ``budget`` the inline deleter budget a bucket store
  enforces (``BucketMessageStore`` takes it).
- It returns a ``Backend``: ``store`` (a ``MessageStore``), ``seqs`` (a ``SeqStore``) and
  optionally ``version`` (names the server's version), ``views`` (a ``ViewReads``: a pull's
  watermarks and slots in one round trip), ``read_marks`` (a ``ReadMarks``: a mark-read's tags
  and read seq together), ``binding`` (a ``CacheBindingRecord``, kept with the store's data:
  without one the backend runs uncached only) and ``invalidation_log`` (an
  ``InvalidationLog``, kept with the store's data: without one a writer cut off from the cache
  may leave its changes served stale by other processes until the cache's TTL ends). Without
  ``views`` and ``read_marks`` the service reads and writes in two steps, with the same answers.

The ports (``typing.Protocol`` classes whose docstrings are the contract the contract suite
checks): ``MessageStore``, ``SeqStore``, ``ViewReads``, ``ReadMarks``,
``CacheBindingRecord``, ``InvalidationLog``. The short road to a ``MessageStore`` is one of
imbucket's own state machines over a repository of yours, each repository method one atomic
step on your engine:

- ``BucketMessageStore(repository, budget)`` over a ``BucketRepository``: buckets of
  ``layout.size`` slots, with OpenIM's insert, tag, spill and budget rules. Settings load and
  the composition root check the bucket arithmetic (``store.max_bucket_bytes`` against the
  limits) for such a store as for a built-in bucket backend.
- ``RowMessageStore(repository)`` over a ``RowRepository``: one record per message.

``MemorySeqStore``, ``MemoryCacheBinding`` and ``MemoryInvalidationLog`` keep counters, the
cache binding and the invalidation log in this process, for a backend that has no seq store of
its own yet (its data then lasts as long as the process). ``slot_to_doc`` / ``slot_from_doc``
/ ``message_to_doc`` / ``message_from_doc`` spell slots and messages as plain JSON-ready dicts
(OpenIM's field names), and ``conversation_of`` reads the conversation back out of a
bucket's doc_id.

Errors a backend raises (all ``ImbucketError``): ``StoreUnavailable`` when the engine could
not be reached or failed mid-operation, ``OutcomeUnknown`` (a ``StoreUnavailable``) when the
connection was lost during a write that is unsafe to repeat, ``WriteRefused`` for a write the
engine refuses as it stands, ``InvalidArgument`` for a value it cannot store, ``ConfigError``
for a url or setting it cannot use.
"""

from __future__ import annotations

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.codec import (
    conversation_of,
    message_from_doc,
    message_to_doc,
    slot_from_doc,
    slot_to_doc,
)
from imbucket.adapters.memory import MemoryCacheBinding, MemoryInvalidationLog, MemorySeqStore
from imbucket.adapters.row import RowMessageStore
from imbucket.adapters.timeouts import Timeouts
from imbucket.app.backends import Backend, StoreFactory
from imbucket.domain.budget import TagBudget
from imbucket.domain.errors import (
    ConfigError,
    ImbucketError,
    InvalidArgument,
    OutcomeUnknown,
    StoreUnavailable,
    WriteRefused,
)
from imbucket.domain.invalidation import Invalidation
from imbucket.domain.layout import BucketLayout
from imbucket.domain.model import (
    EMPTY_SLOT,
    InsertOutcome,
    InsertResult,
    Message,
    Pick,
    Revoke,
    Slot,
    SlotPatch,
    StoreStats,
    TableStats,
    Watermarks,
    viewed_deleters,
)
from imbucket.domain.scan import Counters, ScannedSlot, SendClaim, SeqPage, SlotPage, UserSeqs
from imbucket.domain.tags import Guard, takes_revoke
from imbucket.ports.bucket_repository import BucketRepository, Spilled, Viewed
from imbucket.ports.cache_binding import CacheBindingRecord
from imbucket.ports.invalidation_log import InvalidationLog, LoggedInvalidation
from imbucket.ports.message_store import MessageStore
from imbucket.ports.read_marks import ReadMarks
from imbucket.ports.row_repository import RowRepository
from imbucket.ports.seq_store import SeqStore
from imbucket.ports.view_reads import View, ViewReads

__all__ = [
    "EMPTY_SLOT",
    "Backend",
    "BucketLayout",
    "BucketMessageStore",
    "BucketRepository",
    "CacheBindingRecord",
    "ConfigError",
    "Counters",
    "Guard",
    "ImbucketError",
    "InsertOutcome",
    "InsertResult",
    "InvalidArgument",
    "Invalidation",
    "InvalidationLog",
    "LoggedInvalidation",
    "MemoryCacheBinding",
    "MemoryInvalidationLog",
    "MemorySeqStore",
    "Message",
    "MessageStore",
    "OutcomeUnknown",
    "Pick",
    "ReadMarks",
    "Revoke",
    "RowMessageStore",
    "RowRepository",
    "ScannedSlot",
    "SendClaim",
    "SeqPage",
    "SeqStore",
    "Slot",
    "SlotPage",
    "SlotPatch",
    "Spilled",
    "StoreFactory",
    "StoreStats",
    "StoreUnavailable",
    "TableStats",
    "TagBudget",
    "Timeouts",
    "UserSeqs",
    "View",
    "ViewReads",
    "Viewed",
    "Watermarks",
    "WriteRefused",
    "conversation_of",
    "message_from_doc",
    "message_to_doc",
    "slot_from_doc",
    "slot_to_doc",
    "takes_revoke",
    "viewed_deleters",
]
