"""Upper bounds of what a message, a revoke or an id costs once stored in a bucket.

Each bound holds in every encoding imbucket writes: compact JSON (SQLite, MariaDB, memory),
PostgreSQL's jsonb text (a space after every ``:`` and ``,``) and BSON (MongoDB).
docs/buckets.md derives the constants.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

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
_ANY_ESCAPED = re.compile(f"[{re.escape(''.join(_ESCAPED))}]")


def text_bytes(value: str) -> int:
    """Bytes of value inside a stored string: its UTF-8 plus one per escaped character."""
    size = len(value) if value.isascii() else len(value.encode())
    if _ANY_ESCAPED.search(value) is None:  # one scan settles nearly every value
        return size
    return size + sum(value.count(char) for char in _ESCAPED)


def id_bytes(max_id_length: int) -> int:
    """Bytes of the longest id or short text the limits allow."""
    return CHAR_BYTES * max_id_length


def text_field_bytes(name: str, value_bytes: int) -> int:
    """A string field of a document."""
    return len(name) + FIELD_OVERHEAD + value_bytes


def int_field_bytes(name: str) -> int:
    """An int64 field of a document."""
    return len(name) + FIELD_OVERHEAD + INT_BYTES


def fields_bytes(values: Mapping[str, object], max_id_length: int) -> int:
    """Upper bound of a stored message (or any document) given its validated fields by name.

    A value of None stands for a text not known yet (a field ``send`` will stamp): it
    counts as the longest id. Every int counts at its largest, a mapping as a document
    (options, the offline push), a tuple or list as an array of strings.
    """
    total = DOC_OVERHEAD
    for name, value in values.items():
        total += text_bytes(name) + FIELD_OVERHEAD + _value_bytes(value, max_id_length)
    return total


def _value_bytes(value: object, max_id_length: int) -> int:
    if isinstance(value, str):
        return text_bytes(value)
    if value is None:
        return id_bytes(max_id_length)
    if isinstance(value, bool):
        return BOOL_BYTES
    if isinstance(value, int):
        return INT_BYTES
    if isinstance(value, Mapping):
        return fields_bytes(value, max_id_length)
    assert isinstance(value, tuple | list)
    return DOC_OVERHEAD + sum(text_bytes(entry) + ENTRY_OVERHEAD for entry in value)


def revoke_bytes(max_id_length: int) -> int:
    """Upper bound of a stored revoke: user_id and nickname are ids, role and time ints."""
    texts = sum(text_field_bytes(name, id_bytes(max_id_length)) for name in ("user_id", "nickname"))
    return DOC_OVERHEAD + texts + int_field_bytes("role") + int_field_bytes("time")


def entry_bytes(max_id_length: int) -> int:
    """Upper bound of one user id inside a tag array (del_list, read_by)."""
    return id_bytes(max_id_length) + ENTRY_OVERHEAD
