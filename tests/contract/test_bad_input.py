"""Bad input meets a typed ImbucketError before anything is written; stored data stays intact."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from imbucket.app import MessageService
from imbucket.domain.errors import (
    ContentTooLarge,
    ConversationMismatch,
    ImbucketError,
    InvalidArgument,
    InvalidMessage,
    InvalidSeq,
)
from imbucket.domain.model import Actor, Role
from imbucket.testing.dump import dump
from imbucket.testing.factories import CONV, draft, message, messages

BAD_CALLS: dict[str, tuple[type[ImbucketError], Callable[[MessageService], object]]] = {
    "seq zero": (InvalidSeq, lambda s: s.pull(CONV, "bob", [0])),
    "negative seq": (InvalidSeq, lambda s: s.delete_for_me(CONV, [-1], "bob")),
    "bool seq": (InvalidSeq, lambda s: s.pull(CONV, "bob", [True])),
    "float seq": (InvalidSeq, lambda s: s.mark_read(CONV, [1.0], "bob")),
    "str seq": (InvalidSeq, lambda s: s.pull(CONV, "bob", ["1"])),
    "huge seq": (InvalidArgument, lambda s: s.pull(CONV, "bob", [2**70])),
    "seqs not a list": (InvalidArgument, lambda s: s.pull(CONV, "bob", "123")),
    "empty conversation": (InvalidArgument, lambda s: s.pull("", "bob", [1])),
    "dict conversation": (InvalidArgument, lambda s: s.pull({"$ne": 1}, "bob", [1])),
    "nul in user": (InvalidArgument, lambda s: s.delete_for_me(CONV, [1], "bo\x00b")),
    "long user": (InvalidArgument, lambda s: s.clear_history(CONV, "u" * 10_000)),
    "wrong conversation": (
        ConversationMismatch,
        lambda s: s.ingest(CONV, [message(11), message(11, "sg_other")]),
    ),
    "oversized content": (
        ContentTooLarge,
        lambda s: s.ingest(CONV, [message(11, content="x" * (64 * 1024 + 1))]),
    ),
    "nul in content": (InvalidMessage, lambda s: s.ingest(CONV, [message(11, content="a\x00")])),
    "not a message": (InvalidMessage, lambda s: s.ingest(CONV, [message(11), {"seq": 12}])),
    "repeated seq": (InvalidMessage, lambda s: s.ingest(CONV, [message(11), message(11)])),
    "seq zero message": (InvalidSeq, lambda s: s.ingest(CONV, [replace(message(11), seq=0)])),
    "bad draft": (InvalidMessage, lambda s: s.send(CONV, [draft(1), draft(2, send_id="")])),
    "bad actor": (InvalidArgument, lambda s: s.purge(CONV, [1], "olivia")),
    "bad role": (InvalidArgument, lambda s: s.purge(CONV, [1], Actor("olivia", 7))),  # type: ignore[arg-type]
    "range backwards": (InvalidArgument, lambda s: s.pull_range(CONV, "bob", 5, 2)),
    "range too long": (InvalidArgument, lambda s: s.pull_range(CONV, "bob", 1, 100_000)),
    "count zero": (InvalidArgument, lambda s: s.pull_latest(CONV, "bob", 0)),
    "beyond max_seq": (InvalidArgument, lambda s: s.purge(CONV, [11], Actor("o", Role.OWNER))),
    "nul in nickname": (
        InvalidArgument,
        lambda s: s.revoke(CONV, 1, Actor("alice"), nickname="Al\x00ice"),
    ),
    "seqs range too long for len()": (InvalidArgument, lambda s: s.pull(CONV, "bob", range(2**64))),
    "too many drafts": (InvalidArgument, lambda s: s.send(CONV, [draft(n) for n in range(1001)])),
    "too many messages": (InvalidArgument, lambda s: s.ingest(CONV, messages(1, 1001))),
    "client_msg_id twice": (InvalidMessage, lambda s: s.send(CONV, [draft(1), draft(1)])),
    "seq above 2**62": (InvalidMessage, lambda s: s.ingest(CONV, [message(2**62 + 1)])),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_is_refused_and_changes_nothing(service: MessageService, case: str) -> None:
    service.ingest(CONV, messages(1, 10))
    service.delete_for_me(CONV, [3], "bob")
    before = dump(service)
    error, call = BAD_CALLS[case]
    with pytest.raises(error):
        call(service)
    assert dump(service) == before
