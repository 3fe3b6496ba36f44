"""Model-based property test: random operations by several users on a backend and on the pure
reference model; every user's view of every seq must be identical at each step's end."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from imbucket.app import MessageService
from imbucket.domain.errors import ImbucketError
from imbucket.domain.model import Actor, Draft, Message, Role, SessionType
from imbucket.domain.projection import Entry, MessageView
from imbucket.testing.reference import ReferenceConversation
from imbucket.testing.rows import EARLY_TAGS, SEND_CLAIMS, needs

USERS = ("u1", "u2", "u3")
ROLES = (Role.MEMBER, Role.ADMIN, Role.OWNER, Role.APP_ADMIN)
EXAMPLES = int(
    os.environ.get("IMBUCKET_PROPERTY_EXAMPLES", "200" if os.environ.get("CI") else "50")
)

# mongoeco's cost per command grows with the collection (measured on 2 cores: a 100-message
# insert_many takes 0.2 s into an empty collection, 3 s with 400 rows present), so every example
# is slower than the one before: 50 examples took 44 s on mongo-bucket and 324 s on mongo-row
# (a document per message). Emulated rows run fewer examples; every other row, and the Mongo
# rows on a real MongoDB, run them all.
EMULATED_EXAMPLES = min(EXAMPLES, 20)

actors = st.builds(Actor, st.sampled_from(USERS), st.sampled_from(ROLES))


def normalized(entries: list[Entry]) -> list[tuple[Any, ...]]:
    """Views without server clocks: the revoke time is the service's own."""
    out: list[tuple[Any, ...]] = []
    for entry in entries:
        if isinstance(entry, MessageView):
            revoked = entry.revoked and (entry.revoked.user_id, entry.revoked.role)
            message = None if entry.revoked else entry.message
            out.append((entry.seq, message, revoked, entry.is_read))
        else:
            out.append((entry.seq, entry.reason))
    return out


def retries(draft: Draft) -> list[Draft]:
    """Ways a draft comes back: unchanged, edited, or with another sender's id."""
    other = USERS[(USERS.index(draft.send_id) + 1) % len(USERS)]
    return [draft, replace(draft, content="edited"), replace(draft, send_id=other)]


class ConversationMachine(RuleBasedStateMachine):
    """One conversation driven on a backend and on the reference model side by side."""

    def __init__(self, service: MessageService) -> None:
        super().__init__()
        self.service = service
        self.conversation = f"prop-{uuid.uuid4().hex[:12]}"
        self.model = ReferenceConversation(self.conversation)
        self.session_type = SessionType.GROUP
        self.canonical: dict[int, Message] = {}
        self.drafts: list[Draft] = []  # every draft sent so far, to send again

    @initialize(single=st.booleans(), first=st.sets(st.integers(1, 12), max_size=6))
    def start(self, single: bool, first: set[int]) -> None:
        """Pick the chat type and ingest a first batch with holes (allocated, never stored)."""
        self.session_type = SessionType.SINGLE if single else SessionType.GROUP
        batch = [self.message(seq, False) for seq in sorted(first)]
        assert self.service.ingest(self.conversation, batch) == self.model.ingest(batch)

    def seqs(self, data: st.DataObject) -> list[int]:
        """Mostly allocated seqs, sometimes one beyond max_seq."""
        top = self.model.max_seq + 1
        return data.draw(st.lists(st.integers(1, top), min_size=1, max_size=4, unique=True))

    def both(self, call_service: Any, call_model: Any) -> Any:
        """Run one operation on both sides: same result, or the same error type."""
        try:
            expected = call_model()
        except ImbucketError as error:
            try:
                call_service()
            except type(error):
                return None
            raise AssertionError(f"service accepted what the model refused: {error!r}") from None
        actual = call_service()
        return expected, actual

    def message(self, seq: int, variant: bool) -> Message:
        base = self.canonical.get(seq) or Message(
            conversation_id=self.conversation,
            seq=seq,
            send_id=USERS[seq % len(USERS)],
            client_msg_id=f"ingest-{seq}",
            content=f"ingested {seq}",
            session_type=self.session_type,
        )
        self.canonical.setdefault(seq, base)
        return replace(base, content="a different text") if variant else base

    @rule(sender=st.sampled_from(USERS), count=st.integers(0, 3), data=st.data())
    def send(self, sender: str, count: int, data: st.DataObject) -> None:
        """New drafts mixed with drafts sent before: retried as they were, edited, or
        claimed by another sender; now and then one client_msg_id twice in the batch."""
        new = [
            Draft(
                sender,
                f"hello {i}",
                f"{sender}-{len(self.drafts)}-{i}",
                session_type=self.session_type,
            )
            for i in range(count)
        ]
        drafts = list(new)
        if self.drafts:
            again = data.draw(st.lists(st.sampled_from(self.drafts), max_size=2))
            drafts += [data.draw(st.sampled_from(retries(draft))) for draft in again]
        if not drafts:
            return
        drafts = data.draw(st.permutations(drafts))
        result = self.both(
            lambda: self.service.send(self.conversation, drafts),
            lambda: self.model.check_send(drafts),
        )
        if result is None:
            return
        self.model.sent(drafts, result[1])
        self.canonical.update((message.seq, message) for message in result[1])
        self.drafts += new

    @rule(variant=st.booleans(), data=st.data())
    def ingest(self, variant: bool, data: st.DataObject) -> None:
        top = self.model.max_seq + 3
        seqs = data.draw(st.lists(st.integers(1, top), min_size=1, max_size=5, unique=True))
        batch = [self.message(seq, variant and seq == seqs[0]) for seq in seqs]
        batch = data.draw(st.permutations(batch))
        result = self.both(
            lambda: self.service.ingest(self.conversation, batch),
            lambda: self.model.ingest(batch),
        )
        assert result is not None and result[0] == result[1]

    @rule(actor=actors, sender_role=st.sampled_from(ROLES), data=st.data())
    def revoke(self, actor: Actor, sender_role: Role, data: st.DataObject) -> None:
        seq = self.seqs(data)[0]
        result = self.both(
            lambda: self.service.revoke(self.conversation, seq, actor, sender_role=sender_role),
            lambda: self.model.revoke(seq, actor, sender_role),
        )
        assert result is None or result[0] == result[1]

    @rule(user=st.sampled_from(USERS), data=st.data())
    def delete_for_me(self, user: str, data: st.DataObject) -> None:
        seqs = self.seqs(data)
        self.both(
            lambda: self.service.delete_for_me(self.conversation, seqs, user),
            lambda: self.model.delete_for(seqs, user),
        )

    @rule(user=st.sampled_from(USERS), data=st.data())
    def mark_read(self, user: str, data: st.DataObject) -> None:
        seqs = self.seqs(data)
        self.both(
            lambda: self.service.mark_read(self.conversation, seqs, user),
            lambda: self.model.mark_read(seqs, user),
        )

    @rule(actor=actors, data=st.data())
    def purge(self, actor: Actor, data: st.DataObject) -> None:
        seqs = self.seqs(data)
        self.both(
            lambda: self.service.purge(self.conversation, seqs, actor),
            lambda: self.model.purge(seqs, actor),
        )

    @rule(user=st.sampled_from(USERS))
    def clear_history(self, user: str) -> None:
        self.service.clear_history(self.conversation, user)
        self.model.clear_history(user)

    @rule(actor=actors)
    def clear_for_everyone(self, actor: Actor) -> None:
        self.both(
            lambda: self.service.clear_for_everyone(self.conversation, actor),
            lambda: self.model.clear_for_everyone(actor),
        )

    @rule(user=st.sampled_from(USERS), count=st.integers(1, 5))
    def pull_latest(self, user: str, count: int) -> None:
        expected = normalized(self.model.latest(user, count))
        actual = normalized(self.service.pull_latest(self.conversation, user, count))
        assert actual == expected, f"{user}'s latest {count} differ"

    @invariant()
    def every_view_matches(self) -> None:
        seqs = list(range(1, self.model.max_seq + 2))
        for user in USERS:
            expected = normalized(self.model.view(user, seqs))
            actual = normalized(self.service.pull(self.conversation, user, seqs))
            assert actual == expected, f"{user} sees something else"


@needs(SEND_CLAIMS, EARLY_TAGS)
def test_backend_matches_the_reference_model(
    service: MessageService,
    imbucket_emulated_server: bool,
    row_examples: Callable[[int], int],
) -> None:
    run_state_machine_as_test(
        lambda: ConversationMachine(service),
        settings=settings(
            max_examples=row_examples(EMULATED_EXAMPLES if imbucket_emulated_server else EXAMPLES),
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
