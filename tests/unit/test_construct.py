"""domain.quick_constructors: a quick constructor builds exactly what calling the class builds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from imbucket.domain.model import (
    MESSAGE_FIELDS,
    Draft,
    Message,
    Revoke,
    Role,
    Slot,
    stored_message,
    stored_slot,
)
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.domain.quick_constructors import quick_constructor, shared_fields


@dataclass(frozen=True, slots=True)
class _KeywordOnly:
    value: int = field(kw_only=True)


MESSAGE = Message("si_a_b", 7, "a", "c-7", "hi", recv_id="b", options={"history": True})


@pytest.mark.parametrize(
    ("cls", "args", "kwargs"),
    [
        (Message, ("si_a_b", 7, "a", "c-7", "hi"), {"recv_id": "b", "options": {"x": True}}),
        (Slot, (MESSAGE,), {"deleted_by": frozenset({"b"}), "is_read": True}),
        (Slot, (), {}),
        (MessageView, (7, MESSAGE), {"revoked": Revoke("a", Role.ADMIN), "is_read": False}),
        (Tombstone, (7, TombstoneReason.DELETED), {}),
        (Draft, ("a", "hi", "c-1"), {"group_id": "g", "sender_nickname": "Al", "is_read": True}),
        (_KeywordOnly, (), {"value": 3}),
    ],
)
def test_builds_what_the_class_builds(
    cls: type, args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    built = quick_constructor(cls)(*args, **kwargs)
    expected = cls(*args, **kwargs)
    assert type(built) is cls
    assert built == expected
    assert repr(built) == repr(expected)
    assert dataclasses.astuple(built) == dataclasses.astuple(expected)


def test_the_result_stays_frozen_and_hashes_like_the_class() -> None:
    slot = stored_slot(MESSAGE, None, frozenset({"b"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        slot.is_read = True  # type: ignore[misc]
    tombstone = quick_constructor(Tombstone)(3, TombstoneReason.PURGED)
    assert hash(tombstone) == hash(Tombstone(3, TombstoneReason.PURGED))


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    first = quick_constructor(Message)("c", 1, "a", "m-1", "x")
    second = quick_constructor(Message)("c", 2, "a", "m-2", "x")
    assert first.options == {} and first.options is not second.options


def test_stored_message_takes_the_values_after_seq_in_field_order() -> None:
    values = [getattr(MESSAGE, name) for name in MESSAGE_FIELDS[1:]]
    assert stored_message("si_a_b", 7, values) == MESSAGE


@dataclass(frozen=True)
class _NoSlots:
    value: int


@dataclass(slots=True)
class _NotFrozen:
    value: int


@dataclass(frozen=True, slots=True)
class _Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@dataclass(frozen=True, slots=True)
class _Base:
    value: int = 0


@dataclass(frozen=True, slots=True)
class _OnAStoringBase(_Base):
    other: int = 0


@pytest.mark.parametrize("cls", [_NoSlots, _NotFrozen, _Checked, _OnAStoringBase, int])
def test_refuses_classes_it_could_build_wrong(cls: type) -> None:
    with pytest.raises(TypeError):
        quick_constructor(cls)


def test_shared_fields_refuses_a_class_that_stores_them_itself() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Stores:
        value: int = 0

    with pytest.raises(TypeError, match="__slots__"):
        shared_fields(Stores)


def test_a_message_takes_its_extras_by_keyword_and_keeps_them_last() -> None:
    with pytest.raises(TypeError):
        Message("c", 1, "a", "m-1", "x", "", "", "", 1, 101, 0, 0, 2, "nick")  # type: ignore[misc]
    assert repr(MESSAGE).startswith("Message(conversation_id='si_a_b', seq=7, send_id='a',")
    assert MESSAGE_FIELDS[-1] == "attached_info"
