"""Hypothesis strategies for calls of every MessageService method with junk in them.

Each parameter has a kind; VALID[kind] draws well-formed values (ids from the dump's pools,
so a dump sees everything a call could touch) and JUNK[kind] draws values that the service
must refuse whatever the other arguments are. A junk call puts junk in at least one
parameter, so it must raise an ImbucketError and write nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from functools import cache
from typing import Any

from hypothesis import strategies as st

from imbucket.domain.model import (
    MAX_INT64,
    MAX_SEQ,
    Actor,
    Draft,
    Message,
    OfflinePush,
    Role,
    SessionType,
)
from imbucket.testing.dump import CONVERSATIONS, USERS
from imbucket.testing.factories import draft, message

MAX_ID = 200  # Limits().max_id_length
MAX_CONTENT = 64 * 1024  # Limits().max_content_bytes
MAX_PER_CALL = 1000  # Limits().max_seqs_per_call
ALLOCATED = 3  # every conversation of the seeded state has at least seqs 1..3 allocated
BEYOND = 1000  # no conversation of the seeded state reaches this seq
MODERATORS = (Role.OWNER, Role.APP_ADMIN)

Strategy = st.SearchStrategy[Any]


def either(*alternatives: Strategy) -> Strategy:
    """One of alternatives, each as likely.

    st.one_of flattens nested unions and so would favour whichever alternative has the most
    branches of its own.
    """
    return st.sampled_from(alternatives).flatmap(lambda alternative: alternative)


# ---- scalars -------------------------------------------------------------------------------

not_text = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=8),
    st.sampled_from([{"$ne": 1}, {"$gt": ""}, ["alice"], ("alice",), frozenset({"alice"})]),
)
control_chars = st.characters(max_codepoint=31) | st.just("\x7f")
with_control = st.tuples(st.text(max_size=5), control_chars, st.text(max_size=5)).map("".join)
lone_surrogate = st.sampled_from(["\ud800", "a\udfffb"])
too_long = st.integers(MAX_ID + 1, 20_000).map(lambda n: "u" * n)
# Free text (content, ex) may hold newlines and tabs, never other control characters.
text_control = control_chars.filter(lambda c: c not in "\n\r\t")
with_text_control = st.tuples(st.text(max_size=5), text_control, st.text(max_size=5)).map("".join)

junk_id = either(not_text, st.just(""), too_long, with_control, lone_surrogate)
junk_short_text = either(not_text, too_long, with_control, lone_surrogate)  # "" is allowed
junk_free_text = either(
    not_text,
    with_text_control,
    lone_surrogate,
    st.just("x" * (MAX_CONTENT + 1)),
    st.just("é" * (MAX_CONTENT // 2 + 1)),  # few characters, too many UTF-8 bytes
)
not_int = st.one_of(
    st.none(), st.booleans(), st.floats(), st.text(max_size=3), st.just({"$ne": 1}), st.just([1])
)
junk_field_int = st.one_of(not_int, st.integers(max_value=-1), st.integers(min_value=MAX_INT64 + 1))
junk_seq = st.one_of(
    not_int, st.integers(max_value=0), st.integers(min_value=MAX_INT64 + 1, max_value=2**80)
)
junk_allocated_seq = junk_seq | st.integers(BEYOND, MAX_INT64)
junk_count = st.one_of(not_int, st.integers(max_value=0), st.integers(min_value=MAX_PER_CALL + 1))
junk_role = st.one_of(
    not_int,
    st.integers().filter(lambda r: r not in {role.value for role in Role}),
    st.just("OWNER"),
)
junk_session_type = st.one_of(
    junk_field_int, st.integers(0, 1000).filter(lambda t: t not in SessionType._value2member_map_)
)
junk_options = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.just([("a", True)]),
    st.dictionaries(
        st.text(max_size=3), st.integers() | st.none() | st.text(max_size=2), min_size=1
    ),
    st.dictionaries(junk_short_text.filter(lambda k: _hashable(k)), st.booleans(), min_size=1),
)


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


# ---- lists of seqs -------------------------------------------------------------------------


def with_one(valid: Strategy, junk: Strategy) -> Strategy:
    """A list of valid items with one junk item somewhere."""
    return st.tuples(st.lists(valid, max_size=3), junk, st.lists(valid, max_size=3)).map(
        lambda parts: [*parts[0], parts[1], *parts[2]]
    )


not_a_list = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.just({"$ne": 1}),
    st.just({1: 1}),
    st.frozensets(st.integers(1, ALLOCATED), max_size=3),
)
too_many_seqs = st.sampled_from(
    [list(range(1, MAX_PER_CALL + 2)), range(1, 2**70), range(2**70, 0, -1), range(0, 3)]
)
any_seq = st.integers(1, 30)
allocated_seq = st.integers(1, ALLOCATED)

# ---- drafts and messages -------------------------------------------------------------------

not_bool = st.one_of(st.integers(0, 1), st.none(), st.text(max_size=2))
junk_at_users = st.one_of(
    st.just(["bob"]),  # a list: a message holds a tuple
    st.text(max_size=3),
    st.tuples(junk_id),
)
junk_offline_push = st.one_of(
    st.just({"title": "t"}),
    st.text(max_size=3),
    junk_free_text.map(lambda text: OfflinePush(title=text)),
    not_bool.map(lambda flag: OfflinePush(ios_badge_count=flag)),  # type: ignore[arg-type]
)

DRAFT_JUNK: dict[str, Strategy] = {
    "send_id": junk_id,
    "client_msg_id": junk_id,
    "content": junk_free_text,
    "ex": junk_free_text,
    "content_type": junk_field_int,
    "sender_platform_id": junk_field_int,
    "session_type": junk_session_type,
    "recv_id": junk_short_text,
    "group_id": junk_short_text,
    "sender_nickname": junk_short_text,
    "options": junk_options,
    "sender_face_url": junk_free_text,
    "attached_info": junk_free_text,
    "msg_from": junk_field_int,
    "is_read": not_bool,
    "at_user_id_list": junk_at_users,
    "offline_push": junk_offline_push,
}
MESSAGE_JUNK: dict[str, Strategy] = {
    **DRAFT_JUNK,
    "seq": junk_seq | st.integers(MAX_SEQ + 1, MAX_INT64),
    "server_msg_id": junk_short_text,
    "send_time": junk_field_int,
    "create_time": junk_field_int,
    "status": junk_field_int,
}
assert set(DRAFT_JUNK) == {f.name for f in fields(Draft)}
assert set(MESSAGE_JUNK) == {f.name for f in fields(Message)} - {"conversation_id"}


def one_junk_field(base: Strategy, junk_fields: dict[str, Strategy]) -> Strategy:
    """An item of base with one field replaced by junk."""

    def with_junk(name: str, junk: Strategy) -> Strategy:
        return st.tuples(base, junk).map(lambda pair: replace(pair[0], **{name: pair[1]}))

    return st.one_of(*(with_junk(name, junk) for name, junk in junk_fields.items()))


valid_draft = st.integers(0, 9).map(draft)  # client_msg_ids draft-0..draft-9 (the dump's pool)
valid_drafts = st.lists(valid_draft, max_size=3, unique_by=lambda d: d.client_msg_id)


@cache
def valid_messages(conversation: str) -> Strategy:
    """Lists of up to 3 well-formed messages of conversation."""
    return st.lists(any_seq, max_size=3, unique=True).map(
        lambda seqs: [message(seq, conversation) for seq in seqs]
    )


@cache
def junk_drafts(conversation: str) -> Strategy:
    """Draft lists a send must refuse: a junk draft among valid ones, or no list at all."""
    item = either(
        one_junk_field(valid_draft, DRAFT_JUNK),
        st.one_of(
            not_text,
            st.just(message(1, conversation)),
            st.just({"send_id": "alice", "content": "hi", "client_msg_id": "x"}),
        ),
    )
    return either(
        with_one(valid_draft, item),
        st.one_of(
            not_a_list,
            valid_draft,  # one Draft, not in a list
            st.just([draft(1), replace(draft(1), content="twice")]),
            st.just([draft(n) for n in range(MAX_PER_CALL + 1)]),
        ),
    )


@cache
def junk_messages(conversation: str) -> Strategy:
    """Message lists an ingest must refuse: a junk or misaddressed message among valid ones."""
    valid = any_seq.map(lambda seq: message(seq, conversation))
    elsewhere = next(c for c in CONVERSATIONS if c != conversation)
    item = either(
        one_junk_field(valid, MESSAGE_JUNK),
        st.one_of(
            st.tuples(valid, junk_id | st.just(elsewhere)).map(
                lambda pair: replace(pair[0], conversation_id=pair[1])
            ),
            not_text,
            st.just(draft(1)),
        ),
    )
    return either(
        with_one(valid, item),
        st.one_of(
            not_a_list,
            valid,  # one Message, not in a list
            st.just([message(4, conversation), message(4, conversation)]),
            st.just([message(seq, conversation) for seq in range(1, MAX_PER_CALL + 2)]),
        ),
    )


# ---- actors --------------------------------------------------------------------------------

valid_user = st.sampled_from(USERS)
valid_actor = st.builds(Actor, valid_user, st.sampled_from(Role))
malformed_actor = either(
    not_text,
    st.just({"user_id": "olivia", "role": Role.OWNER}),
    st.just(("olivia", Role.OWNER)),
    st.builds(Actor, junk_id, st.sampled_from(Role)),
    st.builds(Actor, valid_user, junk_role),
)
not_a_moderator = st.builds(Actor, valid_user, st.sampled_from([Role.MEMBER, Role.ADMIN]))

# ---- kinds ---------------------------------------------------------------------------------

Kind = Callable[[str], Strategy]  # the conversation of the call -> values


def _same(strategy: Strategy) -> Kind:
    return lambda _conversation: strategy


VALID: dict[str, Kind] = {
    "conversation": _same(st.sampled_from(CONVERSATIONS)),
    "user": _same(valid_user),
    "seqs": _same(st.lists(any_seq, max_size=5)),
    "allocated_seqs": _same(st.lists(allocated_seq, max_size=3)),
    "seq": _same(any_seq),
    "allocated_seq": _same(allocated_seq),
    "count": _same(st.integers(1, MAX_PER_CALL)),
    "actor": _same(valid_actor),
    "moderator": _same(st.builds(Actor, valid_user, st.sampled_from(MODERATORS))),
    "role": _same(st.sampled_from(Role)),
    "nickname": _same(st.sampled_from(["", "Olivia"])),
    "drafts": _same(valid_drafts),
    "messages": valid_messages,
}
JUNK: dict[str, Kind] = {
    "conversation": _same(junk_id),
    "user": _same(junk_id),
    "seqs": _same(either(not_a_list, too_many_seqs, with_one(any_seq, junk_seq))),
    "allocated_seqs": _same(
        either(not_a_list, too_many_seqs, with_one(allocated_seq, junk_allocated_seq))
    ),
    "seq": _same(junk_seq),
    "allocated_seq": _same(junk_allocated_seq),
    "count": _same(junk_count),
    "actor": _same(malformed_actor),
    "moderator": _same(either(malformed_actor, not_a_moderator)),  # refused: NotPermitted
    "role": _same(junk_role),
    "nickname": _same(junk_short_text),
    "drafts": junk_drafts,
    "messages": junk_messages,
}

# Every public MessageService method taking arguments: parameter name -> kind.
METHODS: dict[str, dict[str, str]] = {
    "send": {"conversation_id": "conversation", "drafts": "drafts"},
    "ingest": {"conversation_id": "conversation", "messages": "messages"},
    "pull": {"conversation_id": "conversation", "viewer_id": "user", "seqs": "seqs"},
    "pull_range": {
        "conversation_id": "conversation",
        "viewer_id": "user",
        "first": "seq",
        "last": "seq",
    },
    "pull_latest": {"conversation_id": "conversation", "viewer_id": "user", "count": "count"},
    "revoke": {
        "conversation_id": "conversation",
        "seq": "allocated_seq",
        "actor": "actor",
        "sender_role": "role",
        "nickname": "nickname",
    },
    "delete_for_me": {
        "conversation_id": "conversation",
        "seqs": "allocated_seqs",
        "user_id": "user",
    },
    "clear_history": {"conversation_id": "conversation", "user_id": "user"},
    "clear_for_everyone": {"conversation_id": "conversation", "actor": "moderator"},
    "purge": {"conversation_id": "conversation", "seqs": "allocated_seqs", "actor": "moderator"},
    "mark_read": {"conversation_id": "conversation", "seqs": "allocated_seqs", "reader_id": "user"},
    "max_seq": {"conversation_id": "conversation"},
    "inspect": {"conversation_id": "conversation", "seq": "seq"},
}


@st.composite
def junk_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A method name and keyword arguments with junk in at least one of them."""
    name = draw(st.sampled_from(sorted(METHODS)))
    params = METHODS[name]
    # Mostly one junk argument, so that every check is reached, not only the first one.
    junk = {draw(st.sampled_from(sorted(params)))}
    junk |= draw(st.sets(st.sampled_from(sorted(params)), max_size=1))
    conversation = draw(st.sampled_from(CONVERSATIONS))
    arguments = {
        param: draw((JUNK if param in junk else VALID)[kind](conversation))
        for param, kind in params.items()
    }
    if "conversation_id" not in junk:
        arguments["conversation_id"] = conversation
    return name, arguments
