"""Typed errors raised by imbucket. Every error a caller can provoke is an ImbucketError."""

from __future__ import annotations


class ImbucketError(Exception):
    """Base class of every error imbucket raises on purpose."""


class InvalidArgument(ImbucketError, ValueError):
    """An argument has the wrong type or value; nothing was written."""


class InvalidSeq(InvalidArgument):
    """A seq is not an int >= 1 (bools are refused too)."""


class SeqNotAllocated(InvalidArgument):
    """A seq lies beyond the conversation's max_seq where it must already exist."""


class InvalidMessage(InvalidArgument):
    """A message or draft breaks a rule (ids, content, conversation, seq)."""


class ContentTooLarge(InvalidMessage):
    """A message's content exceeds the configured maximum size."""


class ConversationMismatch(InvalidMessage):
    """A message's conversation_id differs from the conversation of the call."""


class NotPermitted(ImbucketError, PermissionError):
    """The actor's role does not allow the action; nothing was written."""


class LayoutMismatch(ImbucketError):
    """A store was opened with a bucket size different from the one it was created with."""


class ConfigError(ImbucketError):
    """The configuration is invalid or names a backend that cannot be used."""


class CacheMismatch(ConfigError):
    """A store is opened with another cache than the one it is bound to, or without it.

    Its writes would leave the bound cache serving what they changed (docs/redis.md,
    "One cache per store"); the message names the setting to fix and the command that
    changes the binding. Nothing was written.
    """


class StoreUnavailable(ImbucketError):
    """The storage engine could not be reached or failed mid-operation."""


class WriteRefused(ImbucketError):
    """The store refuses a write as it stands; asking again fails the same way.

    E.g. a value too large for the engine. A ``send`` refused so gives its seqs up
    (docs/sending.md).
    """


class OutcomeUnknown(StoreUnavailable):
    """The connection was lost during a write that is unsafe to repeat; it may have been applied.

    Raised for seq allocation: the seqs of a lost allocation may be used up (a gap, shown as
    MISSING), but they are never handed out again.
    """


class WriteConflict(ImbucketError):
    """A send cannot be completed as asked.

    Its seq holds another message (send and ingest were mixed on one seq range, or another
    sender used the same client_msg_id), or the message of a repeated client_msg_id was purged.
    """


class OpenimIncompatible(WriteRefused):
    """The operation cannot be stored on OpenIM's own layout the way OpenIM reads it back.

    docs/openim.md lists them; nothing is written.
    """
