"""Upper bounds of what a message, a revoke or an id costs once stored in a bucket.

Each bound holds in every encoding imbucket writes: compact JSON (SQLite, MariaDB, memory),
PostgreSQL's jsonb text (a space after every ``:`` and ``,``) and BSON (MongoDB).
docs/buckets.md derives the constants.
"""

from __future__ import annotations

# A key/value pair of a document beyond the key and the value themselves: JSON's quotes,
# colon, comma and spaces (at most 8), BSON's type byte, key NUL, length and value NUL (7).
FIELD_OVERHEAD = 16
# An int64 value: at most 19 digits in JSON (the values are never negative), 8 bytes in BSON.
INT_BYTES = 20
# One character of an id or short text: at most 4 bytes of UTF-8, or 2 for the one-byte
# characters JSON escapes (``"``, ``\\``, tab, CR, LF; other control characters are refused).
CHAR_BYTES = 4
# One string in an array beyond its own bytes: JSON's quotes, comma and space (4); BSON's
# type byte, index key of at most 5 digits, its NUL, the length and the value NUL (12).
ENTRY_OVERHEAD = 12
# A document's or an array's own framing: brackets, or BSON's length and terminating NUL.
DOC_OVERHEAD = 8
# A boolean or null value: "false" in JSON, one byte in BSON.
BOOL_BYTES = 5

_ESCAPED = ('"', "\\", "\n", "\r", "\t")

# The message fields as stored, after ``send`` has stamped the server-side ones.
_TEXT_FIELDS = (
    "send_id",
    "recv_id",
    "group_id",
    "client_msg_id",
    "server_msg_id",
    "content",
    "sender_nickname",
    "ex",
)
_INT_FIELDS = (
    "seq",
    "session_type",
    "content_type",
    "send_time",
    "create_time",
    "status",
    "sender_platform_id",
)


def text_bytes(value: str) -> int:
    """Bytes of value inside a stored string: its UTF-8 plus one per escaped character."""
    return len(value.encode()) + sum(value.count(char) for char in _ESCAPED)


def id_bytes(max_id_length: int) -> int:
    """Bytes of the longest id or short text the limits allow."""
    return CHAR_BYTES * max_id_length


def text_field_bytes(name: str, value_bytes: int) -> int:
    """A string field of a document."""
    return len(name) + FIELD_OVERHEAD + value_bytes


def int_field_bytes(name: str) -> int:
    """An int64 field of a document."""
    return len(name) + FIELD_OVERHEAD + INT_BYTES


def message_bytes(item: object, max_id_length: int) -> int:
    """Upper bound of a stored message; item is a Message or a Draft (fields read by name).

    A Draft lacks the fields ``send`` stamps (seq, server_msg_id, times, status): they are
    counted at their largest, so a draft that passes gives a message that passes.
    """
    total = DOC_OVERHEAD
    for name in _TEXT_FIELDS:
        value = getattr(item, name, None)
        size = text_bytes(value) if isinstance(value, str) else id_bytes(max_id_length)
        total += text_field_bytes(name, size)
    total += sum(int_field_bytes(name) for name in _INT_FIELDS)
    options: dict[str, object] = dict(getattr(item, "options", {}))
    # Each option is a key of the sender's choosing and a boolean (at most "false").
    entries = sum(text_bytes(key) + FIELD_OVERHEAD + BOOL_BYTES for key in options)
    return total + text_field_bytes("options", DOC_OVERHEAD + entries)


def revoke_bytes(max_id_length: int) -> int:
    """Upper bound of a stored revoke: user_id and nickname are ids, role and time ints."""
    texts = sum(text_field_bytes(name, id_bytes(max_id_length)) for name in ("user_id", "nickname"))
    return DOC_OVERHEAD + texts + int_field_bytes("role") + int_field_bytes("time")


def entry_bytes(max_id_length: int) -> int:
    """Upper bound of one user id inside a tag array (del_list, read_by)."""
    return id_bytes(max_id_length) + ENTRY_OVERHEAD
