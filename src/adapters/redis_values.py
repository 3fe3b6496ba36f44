"""The values the Redis cache keeps: slot entries, viewers' marks, watermark parts, tokens."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import replace

import orjson

from imbucket.adapters.codec import slot_from_doc, slot_to_doc
from imbucket.domain.model import Slot, Watermarks, viewed_deleters


def new_token() -> str:
    """A fresh generation token."""
    return secrets.token_hex(8)


def exact_glob(text: str) -> str:
    """The SCAN MATCH pattern that matches text itself only."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in text)


def text_of(value: bytes | str | None) -> str | None:
    """A reply value as text (None stays None)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def entries(
    conversation_id: str,
    seqs: Sequence[int],
    values: Sequence[bytes | str | None],
    marks: Sequence[bytes | str | None],
    viewer: str | None,
) -> tuple[dict[int, Slot], dict[int, str]]:
    """The slots a lookup answers for viewer, and the tokens of entries it could not answer.

    A slot with deleters is answered only with the viewer's mark carrying its fill token.
    """
    slots: dict[int, Slot] = {}
    tokens: dict[int, str] = {}
    for seq, value, mark in zip(seqs, values, marks, strict=True):
        entry = None if value is None else decode_slot(conversation_id, value)
        if entry is None:
            continue
        token, slot, deleters = entry
        if not deleters:
            slots[seq] = slot
        elif viewer is not None and text_of(mark) in (f"{token}1", f"{token}0"):
            deleted = text_of(mark) == f"{token}1"
            slots[seq] = replace(slot, deleted_by=viewed_deleters(viewer, deleted, True))
        else:
            tokens[seq] = token
    return slots, tokens


def watermarks_of(conversation: bytes | str | None, user: bytes | str | None) -> Watermarks | None:
    """The watermarks of the two cached parts ("max,min" and the user's floor); None if not both."""
    conv, floor = text_of(conversation), text_of(user)
    if not conv or not floor:
        return None
    try:
        max_seq, min_seq = (int(part) for part in conv.split(","))
        return Watermarks(max_seq, min_seq, int(floor))
    except ValueError:
        return None


def encode_slot(token: str, slot: Slot) -> bytes:
    """A slot entry: its fill token, whether it has deleters, the slot without them."""
    doc = slot_to_doc(slot)
    del doc["del_list"]
    return orjson.dumps({"t": token, "d": bool(slot.deleted_by), "s": doc})


def decode_slot(conversation_id: str, value: bytes | str) -> tuple[str, Slot, bool] | None:
    """A slot entry: (token, slot without deleters, has deleters).

    None for an unreadable value (treated as a miss and refilled).
    """
    try:
        entry = orjson.loads(value)
        return str(entry["t"]), slot_from_doc(conversation_id, entry["s"]), bool(entry["d"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
