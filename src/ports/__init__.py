"""Ports: the Protocol interfaces the service and the bucket/row state machines depend on."""

from ports.bucket_repository import BucketRepository
from ports.message_cache import MessageCache
from ports.message_store import MessageStore
from ports.seq_store import SeqStore

__all__ = ["BucketRepository", "MessageCache", "MessageStore", "SeqStore"]
