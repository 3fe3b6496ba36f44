"""Entities of the message store: the immutable fact, the mutable tags, and who acts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum
from operator import attrgetter
from typing import get_type_hints

from imbucket.domain.quick_constructors import init_order, quick_constructor, shared_fields
from imbucket.domain.sizes import (
    BOOL_BYTES,
    CHAR_BYTES,
    DOC_OVERHEAD,
    ENTRY_OVERHEAD,
    FIELD_OVERHEAD,
    INT_BYTES,
    fields_bytes,
)

MAX_INT64 = 2**63 - 1
# The highest seq a message may be ingested with. The 2**62 seqs above it are headroom:
# allocating after the highest ingested seq, and the clear-history floor max_seq + 1, then
# never overflow the 64-bit counters of any engine.
MAX_SEQ = 2**62


class SessionType(IntEnum):
    """OpenIM session types."""

    SINGLE = 1
    WRITE_GROUP = 2
    GROUP = 3
    NOTIFICATION = 4


GROUP_SESSION_TYPES = frozenset({SessionType.WRITE_GROUP, SessionType.GROUP})


class ContentType(IntEnum):
    """The OpenIM content types imbucket itself needs to know."""

    TEXT = 101
    REVOKE_NOTIFICATION = 2101


class Role(IntEnum):
    """Role of an actor, asserted by the caller's auth layer (values follow OpenIM's levels)."""

    MEMBER = 20
    ADMIN = 60
    OWNER = 100
    APP_ADMIN = 1000


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits checked before anything is written."""

    max_id_length: int = 200
    max_content_bytes: int = 64 * 1024
    max_seqs_per_call: int = 1000
    # The whole message as stored (content, ex, ids, options, keys), an upper bound over
    # every encoding (imbucket.domain.sizes): what lets a bucket of messages stay under its limit.
    max_message_bytes: int = 70 * 1024


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Actor:
    """Who performs an action, and with which role."""

    user_id: str
    role: Role = Role.MEMBER


@dataclass(frozen=True, slots=True)
class OfflinePush:
    """The push notification a message asks for (OpenIM's OfflinePushInfo, as it stores it)."""

    title: str = ""
    desc: str = ""
    ex: str = ""
    ios_push_sound: str = ""
    ios_badge_count: bool = False


OFFLINE_PUSH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(OfflinePush))


@shared_fields
@dataclass(frozen=True, kw_only=True)
class MessageExtras:
    """The fields a Draft and its Message share after the ones each lists first.

    The sender's profile and OpenIM's metadata, keyword-only in both, declared here once.
    """

    __slots__ = ()
    sender_nickname: str = ""
    sender_platform_id: int = 0
    options: Mapping[str, bool] = field(default_factory=dict)
    ex: str = ""
    sender_face_url: str = ""
    msg_from: int = 0
    is_read: bool = (
        False  # OpenIM's message-level flag, kept as stored (the slot's is the real one)
    )
    offline_push: OfflinePush | None = None
    at_user_id_list: tuple[str, ...] = ()
    attached_info: str = ""

    def __repr__(self) -> str:
        shown = (f"{f.name}={getattr(self, f.name)!r}" for f in init_order(type(self)) if f.repr)
        return f"{type(self).__qualname__}({', '.join(shown)})"


# repr=False: MessageExtras' __repr__ lists the fields in __init__'s order, the extras last.
@dataclass(frozen=True, slots=True, repr=False)
class Message(MessageExtras):
    """One stored message: the fact, never changed once stored (OpenIM's MsgData)."""

    conversation_id: str
    seq: int
    send_id: str
    client_msg_id: str
    content: str
    recv_id: str = ""
    group_id: str = ""
    server_msg_id: str = ""
    session_type: int = SessionType.SINGLE
    content_type: int = ContentType.TEXT
    send_time: int = 0
    create_time: int = 0
    status: int = 2


@dataclass(frozen=True, slots=True, repr=False)
class Draft(MessageExtras):
    """What a sender submits; ``send`` turns it into a Message with a seq and server times."""

    send_id: str
    content: str
    client_msg_id: str
    content_type: int = ContentType.TEXT
    session_type: int = SessionType.SINGLE
    recv_id: str = ""
    group_id: str = ""


_quick_message: Callable[..., Message] = quick_constructor(Message)


def stored_message(conversation_id: str, seq: int, values: Sequence[object]) -> Message:
    """The Message a store holds, from its own stored values, without checking them again.

    values are the stored fields after seq, in MESSAGE_FIELDS order. Only for decoding what
    a store itself wrote, or numbering a message already checked: everything entering a
    store is checked on the way in (``check_message``, ``check_draft``), so a read does not
    pay for the checks again. The values are passed positionally, with no per-field
    conversion, through Message's quick constructor (``imbucket.domain.quick_constructors``).
    """
    return _quick_message(conversation_id, seq, *values)


# The fields a store keeps for a message, in declaration order. conversation_id is left
# out: the bucket or row holding the message implies it.
MESSAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in init_order(Message))[1:]
# What ``send`` stamps on a Draft to make it a Message (seq, server id, times, status).
STAMPED_FIELDS: tuple[str, ...] = tuple(
    name for name in MESSAGE_FIELDS if name not in {f.name for f in fields(Draft)}
)
# The stored fields a Draft carries: all but the stamped ones.
DRAFT_FIELDS: tuple[str, ...] = tuple(name for name in MESSAGE_FIELDS if name not in STAMPED_FIELDS)
_TYPES = get_type_hints(Message)
# Free text, bounded by limits.max_content_bytes; every other str field is an id or a short
# text, bounded by limits.max_id_length.
LONG_TEXT_FIELDS = ("content", "ex", "attached_info", "sender_face_url")
SHORT_TEXT_FIELDS: tuple[str, ...] = tuple(
    name for name in MESSAGE_FIELDS if _TYPES[name] is str and name not in LONG_TEXT_FIELDS
)
INT_FIELDS: tuple[str, ...] = tuple(name for name in MESSAGE_FIELDS if _TYPES[name] is int)
_STR_FIELDS: tuple[str, ...] = tuple(name for name in MESSAGE_FIELDS if _TYPES[name] is str)
_str_values = attrgetter(*_STR_FIELDS)  # the str fields' values in one call
_draft_str_values = attrgetter(*(name for name in _STR_FIELDS if name in DRAFT_FIELDS))
_STAMPED_STRS = sum(1 for name in _STR_FIELDS if name not in DRAFT_FIELDS)
# message_bytes beyond the characters of its strings, options and at-list entries (see
# message_bytes_at_most): every field's key, every int at its largest, the flags, the
# options', at-list's and offline push's framing and the push's keys.
_FIXED_BYTES = (
    DOC_OVERHEAD
    + sum(len(name) + FIELD_OVERHEAD for name in MESSAGE_FIELDS)
    + INT_BYTES * len(INT_FIELDS)
    + BOOL_BYTES  # is_read
    + 3 * DOC_OVERHEAD  # options, at_user_id_list, offline_push
    + sum(len(name) + FIELD_OVERHEAD for name in OFFLINE_PUSH_FIELDS)
    + BOOL_BYTES  # offline_push.ios_badge_count
)


@dataclass(frozen=True, slots=True)
class Revoke:
    """Who revoked a message, with which role, and when (epoch ms).

    role is kept as stored: an imbucket ``Role``, or any level OpenIM writes (0 for an app
    admin, the revoker's app manager level in a 1:1 chat, the group role in a group).
    """

    user_id: str
    role: int
    nickname: str = ""
    time: int = 0


@dataclass(frozen=True, slots=True)
class Slot:
    """One position of a bucket: the message (if stored) plus the tags other actors wrote.

    ``read_by`` keeps readers who marked the seq read before its message was stored; once
    the message is known they count as a read when they are not its sender.

    ``spilled`` says that more deleters are kept outside the bucket (a bucket backend's side
    table), so ``deleted_by`` lists only the ones stored inline. Only a bucket repository
    returns it set; the bucket state machine merges the others in before anyone else sees the slot.
    """

    message: Message | None = None
    revoke: Revoke | None = None
    deleted_by: frozenset[str] = frozenset()
    is_read: bool = False
    purged: bool = False
    read_by: frozenset[str] = frozenset()
    spilled: bool = False

    @property
    def is_empty(self) -> bool:
        """True when nothing at all is stored here (no message, no tag, not purged)."""
        # Field by field rather than ``== EMPTY_SLOT``: a slot holding a message (the usual
        # case on a read) answers at the first test.
        return (
            self.message is None
            and self.revoke is None
            and not self.deleted_by
            and not self.is_read
            and not self.purged
            and not self.read_by
            and not self.spilled
        )

    @property
    def read(self) -> bool:
        """Whether the message counts as read by someone other than its sender."""
        if self.is_read:
            return True
        if not self.read_by or self.message is None:
            return False
        sender = self.message.send_id
        return any(reader != sender for reader in self.read_by)

    def patched(self, patch: SlotPatch) -> Slot:
        """Return the slot with the tag changes of patch applied (set-adds are idempotent)."""
        if patch.purge:
            return PURGED_SLOT
        if self.purged:
            return self
        deleted_by, read_by = self.deleted_by, self.read_by
        if patch.add_deleted_by is not None:
            deleted_by = deleted_by | {patch.add_deleted_by}
        if patch.add_read_by is not None:
            read_by = read_by | {patch.add_read_by}
        return Slot(
            message=self.message,
            revoke=self.revoke,
            deleted_by=deleted_by,
            is_read=self.is_read or patch.set_read,
            purged=False,
            read_by=read_by,
            spilled=self.spilled or patch.mark_spilled,
        )


@dataclass(frozen=True, slots=True)
class SlotPatch:
    """Tag changes for one slot, applied together.

    ``purge`` replaces the whole slot by a purged one and wins over every other field.
    ``mark_spilled`` sets the slot's ``spilled`` flag (see Slot).
    """

    add_deleted_by: str | None = None
    add_read_by: str | None = None
    set_read: bool = False
    purge: bool = False
    mark_spilled: bool = False


EMPTY_SLOT = Slot()
PURGED_SLOT = Slot(purged=True)
# Slot(...) for the read paths that build one per pulled seq (see domain.quick_constructors).
stored_slot: Callable[..., Slot] = quick_constructor(Slot)

# In a viewer's read (``MessageStore.get`` with a viewer) ``deleted_by`` is ``{viewer}`` when
# the viewer deleted the seq, ``{OTHER_DELETERS}`` when only other users did (an id no user can
# have: ids are never empty), and empty when nobody did: a read never ships the deleter list.
OTHER_DELETERS = ""


def viewed_deleters(viewer: str, deleted: bool, others: bool) -> frozenset[str]:
    """``deleted_by`` of a viewer's read: whether the viewer deleted, whether anyone did."""
    if deleted:
        return frozenset((viewer,))
    return frozenset((OTHER_DELETERS,)) if others else frozenset()


class InsertOutcome(StrEnum):
    """What an insert did with one message; each value names a field of InsertResult."""

    INSERTED = "inserted"
    DUPLICATE = "duplicates"  # the very same message was stored there already
    CONFLICT = "conflicts"  # another message holds the seq
    PURGED = "purged"  # the seq was physically deleted: final


@dataclass(frozen=True, slots=True)
class InsertResult:
    """Outcome of an insert, seqs in input order per category."""

    inserted: tuple[int, ...] = ()
    duplicates: tuple[int, ...] = ()
    conflicts: tuple[int, ...] = ()
    purged: tuple[int, ...] = ()

    @classmethod
    def of(cls, messages: Sequence[Message], outcome: Mapping[int, InsertOutcome]) -> InsertResult:
        """The result from each message's outcome by seq, seqs in the messages' order."""
        if len(messages) == 1:  # a send's usual batch
            [message] = messages
            return cls(**{outcome[message.seq].value: (message.seq,)})
        seqs: dict[InsertOutcome, list[int]] = {kind: [] for kind in InsertOutcome}
        for message in messages:
            seqs[outcome[message.seq]].append(message.seq)
        return cls(**{kind.value: tuple(found) for kind, found in seqs.items()})


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Storage footprint as reported by the engine.

    Bytes are pages allocated, as each engine counts them (docs/sql.md); a page-compressed
    table counts its pages' size on disk, known once the engine has written them back.

    The send claims (client_msg_id -> seq, kept for a retention window) are a side table:
    counted apart, not in documents or bytes.
    """

    messages: int
    documents: int
    data_bytes: int
    index_bytes: int
    send_claims: int = 0
    send_claim_bytes: int = 0


@dataclass(frozen=True, slots=True)
class TableStats:
    """Rows and bytes (data and indexes together) of one side table."""

    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Watermarks:
    """The seq bounds a viewer's pull is clamped to."""

    max_seq: int = 0
    min_seq: int = 0
    user_min_seq: int = 0
    # The viewer's own ceiling, 0 for none: OpenIM's seq_user.max_seq, the conversation's
    # max_seq when the viewer left a group (seqs after it are not theirs to see).
    user_max_seq: int = 0

    @property
    def floor(self) -> int:
        """Seqs below this are cleared for the viewer."""
        return max(self.min_seq, self.user_min_seq)

    @property
    def ceiling(self) -> int:
        """Seqs above this are not the viewer's: max_seq, or their own ceiling when lower."""
        if self.user_max_seq:
            return min(self.max_seq, self.user_max_seq)
        return self.max_seq

    def visible(self, seqs: Sequence[int]) -> list[int]:
        """The seqs of seqs that are allocated and not cleared: the only ones worth reading."""
        floor, ceiling = self.floor, self.ceiling
        return [seq for seq in seqs if floor <= seq <= ceiling]

    def latest(self, count: int) -> list[int]:
        """The newest count allocated seqs the viewer has not cleared, ascending."""
        ceiling = self.ceiling
        return list(range(max(ceiling - count + 1, self.floor, 1), ceiling + 1))

    @staticmethod
    def clearing(max_seq: int) -> int:
        """The floor that clears every seq up to max_seq (history cleared at max_seq)."""
        return max_seq + 1


def carried_fields(item: Message | Draft) -> tuple[str, ...]:
    """The stored fields item carries: a Draft lacks the ones send stamps."""
    return MESSAGE_FIELDS if isinstance(item, Message) else DRAFT_FIELDS


def _sized(name: str, value: object) -> object:
    """The value of field name as ``fields_bytes`` counts it (the offline push: a document)."""
    if name != "offline_push":
        return value
    if value is None:
        return {}
    return {key: getattr(value, key) for key in OFFLINE_PUSH_FIELDS}


def message_bytes(item: Message | Draft, max_id_length: int) -> int:
    """Upper bound of item once stored, in every encoding (imbucket.domain.sizes).

    A Draft's stamped fields count at their largest (None: the longest id; every int counts
    at its largest), so that a draft that passes gives a message that passes.
    """
    values: dict[str, object] = {
        name: None if _TYPES[name] is str else 0 for name in STAMPED_FIELDS
    }
    values.update((name, _sized(name, getattr(item, name))) for name in carried_fields(item))
    return fields_bytes(values, max_id_length)


def message_bytes_at_most(message: Message | Draft, max_id_length: int = 0) -> int:
    """A cheap bound of ``message_bytes`` (never below it): every character at its largest.

    Skips the UTF-8 encoding ``message_bytes`` does, for paths where nearly every message is
    far below the limit; compute ``message_bytes`` when this bound is over it. A Draft's
    stamped texts count as max_id_length characters each, as ``message_bytes`` counts them.
    """
    if isinstance(message, Message):
        chars = sum(map(len, _str_values(message)))
    else:
        chars = sum(map(len, _draft_str_values(message))) + _STAMPED_STRS * max_id_length
    options = message.options
    if options:
        chars += sum(map(len, options))
    users = message.at_user_id_list
    if users:
        chars += sum(map(len, users))
    push = message.offline_push
    if push is not None:
        chars += len(push.title) + len(push.desc) + len(push.ex) + len(push.ios_push_sound)
    return (
        _FIXED_BYTES
        + CHAR_BYTES * chars
        + len(options) * (FIELD_OVERHEAD + BOOL_BYTES)
        + len(users) * ENTRY_OVERHEAD
    )


@dataclass(frozen=True, slots=True)
class Pick:
    """Which seqs a pull wants: the listed ones, or the newest ``latest`` not cleared.

    A store reads the watermarks and the slots in one round trip, so it cannot know the
    seqs of a ``latest`` pick before it reads; ``of`` says which seqs the pull shows once the
    watermarks are known.
    """

    seqs: tuple[int, ...] = ()
    latest: int = 0

    def of(self, marks: Watermarks) -> list[int]:
        """The seqs worth reading under marks: visible listed seqs, or the latest ones."""
        return marks.latest(self.latest) if self.latest else marks.visible(self.seqs)
