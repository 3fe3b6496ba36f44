"""Ports: the Protocol interfaces the service and the bucket/row state machines depend on."""

from imbucket.ports.bucket_repository import BucketRepository
from imbucket.ports.message_cache import MessageCache
from imbucket.ports.message_store import MessageStore
from imbucket.ports.seq_store import SeqStore

__all__ = ["BucketRepository", "MessageCache", "MessageStore", "SeqStore"]
