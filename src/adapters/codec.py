"""Plain-dict form of slots and messages, shared by every engine that stores documents.

Field names follow OpenIM's BSON (``msg``, ``revoke``, ``del_list``, ``is_read``); imbucket
adds ``purged`` and ``read_by``, and ``spilled`` only on a slot whose deleters overflowed.
``conversation_id`` is not stored inside a message: it is implied by the bucket or row that
holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from imbucket.domain.model import (
    EMPTY_SLOT,
    INT_FIELDS,
    MESSAGE_FIELDS,
    OFFLINE_PUSH_FIELDS,
    Message,
    OfflinePush,
    Revoke,
    Slot,
    stored_message,
    stored_slot,
)

Doc = dict[str, Any]

# The stored fields after seq (stored_message's order), and which of them are ints.
_AFTER_SEQ = MESSAGE_FIELDS[1:]
_INT_POSITIONS = tuple(n for n, name in enumerate(_AFTER_SEQ) if name in INT_FIELDS)
_VALUES_AFTER_SEQ = itemgetter(*_AFTER_SEQ)
# The stored fields after seq that a document holds in another form than the domain's (an
# array, a sub-document or null): converted on read (``_domain_values``).
_OPTIONS = _AFTER_SEQ.index("options")
_PUSH = _AFTER_SEQ.index("offline_push")
_AT_USERS = _AFTER_SEQ.index("at_user_id_list")
_NOBODY: frozenset[str] = frozenset()  # a slot's deleters or readers when it has none


def plain_int(value: Any) -> Any:
    """Return value as a plain int if a driver decoded it as an int subclass, else as is.

    pymongo decodes every BSON int64 (epoch-ms times, seqs past 2**31) as ``bson.Int64``;
    the domain accepts exact ints only. bools stay bools and anything else stays what it
    is, so stored data of the wrong type is still refused by the domain's checks.
    """
    if isinstance(value, int) and not isinstance(value, bool) and type(value) is not int:
        return int(value)
    return value


def push_to_doc(push: OfflinePush | None) -> Doc | None:
    """The offline push as a plain dict (None when the message asks for none)."""
    if push is None:
        return None
    return {name: getattr(push, name) for name in OFFLINE_PUSH_FIELDS}


def push_from_doc(doc: Any) -> OfflinePush | None:
    """Rebuild an offline push from a dict (push_to_doc's) or a list (the compact form)."""
    if doc is None:
        return None
    if isinstance(doc, Mapping):
        doc = [doc.get(name, "") for name in OFFLINE_PUSH_FIELDS]
    title, desc, ex, sound, badge = doc
    return OfflinePush(title, desc, ex, sound, bool(badge))


def message_to_doc(message: Message) -> Doc:
    """A message as a plain dict (without conversation_id)."""
    doc = {name: getattr(message, name) for name in MESSAGE_FIELDS}
    doc["options"] = dict(message.options)
    doc["session_type"] = int(message.session_type)
    doc["content_type"] = int(message.content_type)
    doc["offline_push"] = push_to_doc(message.offline_push)
    doc["at_user_id_list"] = list(message.at_user_id_list)
    return doc


def _domain_values(converted: list[Any]) -> list[Any]:
    """Stored values after seq as the domain holds them: plain ints, tuples, OfflinePush.

    converted is the caller's own list, converted in place. A null options or at-list
    (OpenIM's encoding of an empty one) reads as empty.
    """
    for position in _INT_POSITIONS:
        if type(converted[position]) is not int:  # BSON's Int64; a JSON engine gives plain ints
            converted[position] = plain_int(converted[position])
    if converted[_OPTIONS] is None:
        converted[_OPTIONS] = {}
    converted[_PUSH] = push_from_doc(converted[_PUSH])
    converted[_AT_USERS] = tuple(converted[_AT_USERS] or ())
    return converted


def message_from_doc(conversation_id: str, doc: Doc) -> Message:
    """Rebuild a message stored by message_to_doc (driver int types become plain ints).

    The store wrote doc from a checked Message, so it is not checked again
    (``imbucket.domain.model.stored_message``); only the stored forms are converted. Keys a
    message written before they existed lacks read as their defaults.
    """
    if len(doc) < len(MESSAGE_FIELDS):
        doc = {**_DOC_DEFAULTS, **doc}
    values = _domain_values(list(_VALUES_AFTER_SEQ(doc)))
    return stored_message(conversation_id, plain_int(doc["seq"]), values)


def revoke_to_doc(revoke: Revoke) -> Doc:
    """A revoke as a plain dict."""
    return {
        "user_id": revoke.user_id,
        "role": int(revoke.role),
        "nickname": revoke.nickname,
        "time": revoke.time,
    }


def revoke_from_doc(doc: Doc) -> Revoke:
    """Rebuild a revoke stored by revoke_to_doc."""
    return Revoke(doc["user_id"], plain_int(doc["role"]), doc["nickname"], plain_int(doc["time"]))


def slot_to_doc(slot: Slot) -> Doc:
    """A slot as a plain dict; every key is present, as in OpenIM's empty-slot shape.

    ``spilled`` is written only when set, so that slots without spilled deleters keep
    OpenIM's shape and size.
    """
    doc = {
        "msg": None if slot.message is None else message_to_doc(slot.message),
        "revoke": None if slot.revoke is None else revoke_to_doc(slot.revoke),
        "del_list": sorted(slot.deleted_by),
        "is_read": slot.is_read,
        "purged": slot.purged,
        "read_by": sorted(slot.read_by),
    }
    if slot.spilled:
        doc["spilled"] = True
    return doc


def slot_from_doc(conversation_id: str, doc: Doc | None) -> Slot:
    """Rebuild a slot; missing keys read as empty (OpenIM's purged slot is just ``{msg: null}``)."""
    if not doc:
        return EMPTY_SLOT
    msg, revoke = doc.get("msg"), doc.get("revoke")
    deleted_by, read_by = doc.get("del_list"), doc.get("read_by")
    return stored_slot(
        None if msg is None else message_from_doc(conversation_id, msg),
        None if revoke is None else revoke_from_doc(revoke),
        frozenset(deleted_by) if deleted_by else _NOBODY,
        bool(doc.get("is_read")),
        bool(doc.get("purged")),
        frozenset(read_by) if read_by else _NOBODY,
        bool(doc.get("spilled")),
    )


def _openim_slot_from_doc(conversation_id: str, _seq: int, doc: Doc | None) -> Slot:
    """``slot_from_doc`` as a ``SlotCodec.from_doc`` (an OpenIM slot carries its own seq)."""
    return slot_from_doc(conversation_id, doc)


def conversation_of(doc_id: str) -> str:
    """The conversation id part of a doc_id (``"{conversation_id}:{index}"``)."""
    return doc_id.rsplit(":", 1)[0]


# The stored fields after seq with the value a compact message leaves out when it ends the
# list (trailing defaults are trimmed and restored on read).
_TRIMMED = {
    "recv_id": "", "group_id": "", "server_msg_id": "", "ex": "", "sender_nickname": "",
    "sender_platform_id": 0, "options": {}, "sender_face_url": "", "msg_from": 0,
    "is_read": False, "offline_push": None, "at_user_id_list": [], "attached_info": "",
}  # fmt: skip
_COMPACT_DEFAULTS: tuple[object, ...] = tuple(_TRIMMED.get(name) for name in _AFTER_SEQ)
# The values of a message dict missing keys (stored before the key existed) read as.
_DOC_DEFAULTS: Doc = {**_TRIMMED, "options": None, "at_user_id_list": None}
# The trailing fields most messages leave at their defaults (options onwards), as the list
# a compact message's tail is compared with before trimming field by field.
_USUAL_KEPT = _AFTER_SEQ.index("options")
_USUAL_TAIL = list(_COMPACT_DEFAULTS[_USUAL_KEPT:])
_SEND_TIME = _AFTER_SEQ.index("send_time")
_CREATE_TIME = _AFTER_SEQ.index("create_time")
_ROLE = 1  # position of the role in a compact revoke
_attributes_after_seq = attrgetter(*_AFTER_SEQ)  # a message's fields after seq, in one call
_ENUM_POSITIONS = tuple(_AFTER_SEQ.index(name) for name in ("session_type", "content_type"))
_push_values = attrgetter(*OFFLINE_PUSH_FIELDS)  # push_to_doc's values, in one call


@dataclass(frozen=True, slots=True)
class SlotCodec:
    """How a bucket slot is written as a JSON/BSON document, and read back.

    ``keys`` names each slot field's stored key (the JSON SQL and the engines' queries read
    and write them by these names); ``message_marker`` is a path below the message key that
    exists once per stored message and ``message_type`` the JSON type of a stored message
    (for counting messages in the engine).
    """

    name: str
    keys: Mapping[str, str]
    message_marker: str
    message_type: str
    to_doc: Callable[[Slot], Doc]
    from_doc: Callable[[str, int, Doc | None], Slot]
    writes_empty_keys: bool = False  # every slot holds every key, empty ones too (OpenIM's)

    def key(self, name: str) -> str:
        """The stored key of slot field name."""
        return self.keys[name]

    def message_doc(self, message: Message) -> Any:
        """A message as this codec stores it under the message key."""
        return self.to_doc(Slot(message=message))[self.keys["msg"]]

    def revoke_doc(self, revoke: Revoke) -> Any:
        """A revoke as this codec stores it under the revoke key."""
        return self.to_doc(Slot(revoke=revoke))[self.keys["revoke"]]


def compact_slot_to_doc(slot: Slot) -> Doc:
    """A slot with only what differs from an empty one, under one-letter keys.

    The message is a list of its fields after seq (the seq is the slot's address), its
    create_time as an offset from send_time and its trailing default fields trimmed; a
    revoke is ``[user_id, role, nickname, time]``. An empty slot is ``{}``.
    """
    message = slot.message
    if message is not None and slot.revoke is None and _untagged(slot):
        return {"m": _compact_message(message)}  # the usual slot, without the general walk
    doc: Doc = {}
    if message is not None:
        doc["m"] = _compact_message(message)
    if slot.revoke is not None:
        doc["r"] = list(revoke_to_doc(slot.revoke).values())
    for key, value in (("d", slot.deleted_by), ("b", slot.read_by)):
        if value:
            doc[key] = sorted(value)
    for key, flag in (("i", slot.is_read), ("p", slot.purged), ("s", slot.spilled)):
        if flag:
            doc[key] = True
    return doc


def _untagged(slot: Slot) -> bool:
    """Whether slot has no deleter, early reader or flag."""
    return not (slot.deleted_by or slot.read_by or slot.is_read or slot.purged or slot.spilled)


def compact_row_doc(
    values: list[Any] | None, revoke: Sequence[Any] | None, is_read: bool, purged: bool
) -> Doc:
    """``compact_slot_to_doc`` of a slot with no deleter or early reader, from its parts.

    values are the message's fields after seq as a Message holds them (``compact_values``
    takes them over), revoke the revoke's ``[user_id, role, nickname, time]``; for a store
    that keeps slots as rows and copies them into buckets without building Slots.
    """
    if purged:
        return {"p": True}
    doc: Doc = {}
    if values is not None:
        doc["m"] = compact_values(values)
    if revoke is not None:
        doc["r"] = list(revoke)
    if is_read:
        doc["i"] = True
    return doc


def _compact_message(message: Message) -> list[Any]:
    """A message's fields after seq as ``message_to_doc`` gives them, compacted (see above)."""
    return compact_values(list(_attributes_after_seq(message)))


def compact_values(values: list[Any]) -> list[Any]:
    """A message's fields after seq (in MESSAGE_FIELDS order), compacted in place (see above)."""
    for position in _ENUM_POSITIONS:
        if type(values[position]) is not int:
            values[position] = int(values[position])
    options = values[_OPTIONS]
    values[_OPTIONS] = dict(options) if options else {}
    push = values[_PUSH]
    if push is not None:
        values[_PUSH] = list(_push_values(push))
    users = values[_AT_USERS]
    values[_AT_USERS] = list(users) if users else []
    if values[_USUAL_KEPT:] == _USUAL_TAIL:  # the usual extras, all defaults: one C compare
        del values[_USUAL_KEPT:]
    return compact_usual(values)


def compact_usual(values: list[Any]) -> list[Any]:
    """``compact_values`` of a message whose extras are all defaults, in place.

    values are its fields after seq up to before options (plain ints), or all of them
    already in compact_values' types: create_time becomes an offset, trailing defaults go.
    """
    values[_CREATE_TIME] -= values[_SEND_TIME]
    kept = len(values)
    while kept and values[kept - 1] == _COMPACT_DEFAULTS[kept - 1]:
        kept -= 1
    del values[kept:]
    return values


def compact_slot_from_doc(conversation_id: str, seq: int, doc: Doc | None) -> Slot:
    """Rebuild a slot written by compact_slot_to_doc at seq; missing keys read as empty."""
    if not doc:
        return EMPTY_SLOT
    message, revoke = doc.get("m"), doc.get("r")
    if message is not None:
        values = _domain_values([*message, *_COMPACT_DEFAULTS[len(message) :]])
        values[_CREATE_TIME] += values[_SEND_TIME]
        message = stored_message(conversation_id, seq, values)
        if len(doc) == 1:  # the usual slot: a message and no tag
            return stored_slot(message)
    if revoke is not None:
        user_id, role, nickname, time = revoke
        revoke = Revoke(user_id, plain_int(role), nickname, plain_int(time))
    deleted_by, read_by = doc.get("d"), doc.get("b")
    return stored_slot(
        message,
        revoke,
        frozenset(deleted_by) if deleted_by else _NOBODY,
        bool(doc.get("i")),
        bool(doc.get("p")),
        frozenset(read_by) if read_by else _NOBODY,
        bool(doc.get("s")),
    )


_SLOT_FIELDS = ("msg", "revoke", "del_list", "is_read", "purged", "read_by", "spilled")

OPENIM = SlotCodec(
    name="openim",
    keys={name: name for name in _SLOT_FIELDS},
    message_marker="msg.seq",
    message_type="object",
    to_doc=slot_to_doc,
    from_doc=_openim_slot_from_doc,
    writes_empty_keys=True,
)
COMPACT = SlotCodec(
    name="compact",
    keys=dict(zip(_SLOT_FIELDS, ("m", "r", "d", "i", "p", "b", "s"), strict=True)),
    message_marker="m[0]",
    message_type="array",
    to_doc=compact_slot_to_doc,
    from_doc=compact_slot_from_doc,
)
CODECS: dict[str, SlotCodec] = {codec.name: codec for codec in (COMPACT, OPENIM)}
