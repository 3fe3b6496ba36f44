"""Junk arguments to every MessageService method: only ImbucketErrors, and nothing written.

Hypothesis draws calls with junk in at least one argument (wrong types, empty or huge ids,
NUL and other control characters, dict-shaped ids such as {"$ne": 1}, negative and enormous
seqs, oversized content, malformed drafts, messages, actors and roles; see
imbucket.testing/strategies.py) against a seeded store. Each call must raise an ImbucketError
subclass, never anything else, and a full dump of the store must be the same before and after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from imbucket.app import MessageService
from imbucket.domain.errors import ImbucketError, InvalidMessage
from imbucket.domain.model import MAX_INT64, MAX_SEQ, Actor, Role, SessionType
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.testing.dump import dump
from imbucket.testing.factories import CONV, draft, message, messages
from imbucket.testing.rows import INT64_FIELDS, needs
from imbucket.testing.strategies import junk_calls

EXAMPLES = int(os.environ.get("IMBUCKET_HOSTILE_EXAMPLES", "100" if os.environ.get("CI") else "25"))
SINGLE = "si_alice_bob"


def seed(service: MessageService) -> None:
    """Messages, tags, watermarks and send claims in both conversations of the dump."""
    service.ingest(CONV, messages(1, 6))
    service.send(CONV, [draft(0), draft(1), draft(2)])
    service.seqs.raise_max_seq(CONV, 12)  # 10..12 allocated, not stored yet
    service.revoke(CONV, 2, Actor("alice"))
    service.revoke(CONV, 11, Actor("olivia", Role.OWNER))
    service.delete_for_me(CONV, [3, 12], "bob")
    service.purge(CONV, [4], Actor("olivia", Role.OWNER))
    service.clear_history(CONV, "carol")
    single = {"session_type": SessionType.SINGLE, "group_id": "", "recv_id": "bob"}
    service.ingest(SINGLE, [message(seq, SINGLE, **single) for seq in (1, 2, 3)])
    service.mark_read(SINGLE, [1, 2], "bob")


def test_junk_arguments_raise_typed_errors_and_write_nothing(
    service: MessageService, row_examples: Callable[[int], int]
) -> None:
    seed(service)

    @settings(
        max_examples=row_examples(EXAMPLES),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )
    @given(call=junk_calls())
    def refused(call: tuple[str, dict[str, Any]]) -> None:
        name, arguments = call
        before = dump(service)
        with pytest.raises(ImbucketError):
            getattr(service, name)(**arguments)
        assert dump(service) == before

    refused()


@needs(INT64_FIELDS)
def test_the_largest_valid_values_are_stored_exactly(service: MessageService) -> None:
    """Ids of the maximum length in 4-byte characters, 64 KiB of content, the highest seq.

    Content and ex each reach their 64 KiB limit, in two messages: a whole message is also
    held to limits.max_message_bytes (70 KiB stored, docs/buckets.md).
    """
    conversation = "c" * 199 + "😀"
    user = "😀" * 200
    biggest = message(
        MAX_SEQ,
        conversation,
        send_id=user,
        client_msg_id="🙂" * 200,
        server_msg_id="s" * 200,
        sender_nickname="é" * 200,
        content="😀" * (64 * 1024 // 4),
        ex="\n\t" + "ü" * 1000,
        options={"k" * 200: True},
        send_time=MAX_INT64,
        create_time=MAX_INT64,
        sender_platform_id=MAX_INT64,
    )
    widest_ex = replace(
        biggest, seq=MAX_SEQ - 1, content="short", ex="\n\t" + "ü" * (64 * 1024 // 2 - 1)
    )
    inserted = service.ingest(conversation, [widest_ex, biggest]).inserted
    assert inserted == (MAX_SEQ - 1, MAX_SEQ)
    seen = service.pull(conversation, "bob", [MAX_SEQ - 1, MAX_SEQ])
    assert [entry.message for entry in seen if isinstance(entry, MessageView)] == [
        widest_ex,
        biggest,
    ]
    [sent] = service.send(conversation, [draft(1, send_id=user)])
    assert sent.seq == MAX_SEQ + 1
    with pytest.raises(InvalidMessage, match="highest storable seq"):
        service.ingest(conversation, [message(MAX_SEQ + 2, conversation)])
    assert service.delete_for_me(conversation, [MAX_SEQ], user) == 1
    assert service.revoke(conversation, MAX_SEQ + 1, Actor(user), nickname="😀" * 200)
    assert service.clear_history(conversation, "bob") == MAX_SEQ + 2
    owner = Actor("😀" * 200, Role.OWNER)
    assert service.clear_for_everyone(conversation, owner) == MAX_SEQ + 2
    assert service.pull(conversation, user, [MAX_SEQ, MAX_INT64]) == [
        Tombstone(MAX_SEQ, TombstoneReason.CLEARED),
        Tombstone(MAX_INT64, TombstoneReason.UNALLOCATED),
    ]
