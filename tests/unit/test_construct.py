"""domain.quick_constructors: a quick constructor builds exactly what calling the class builds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from imbucket.domain.model import Message, Revoke, Role, Slot, stored_message, stored_slot
from imbucket.domain.projection import MessageView, Tombstone, TombstoneReason
from imbucket.domain.quick_constructors import quick_constructor

MESSAGE = Message("si_a_b", 7, "a", "c-7", "hi", recv_id="b", options={"history": True})


@pytest.mark.parametrize(
    ("cls", "args", "kwargs"),
    [
        (Message, ("si_a_b", 7, "a", "c-7", "hi"), {"recv_id": "b", "options": {"x": True}}),
        (Slot, (MESSAGE,), {"deleted_by": frozenset({"b"}), "is_read": True}),
        (Slot, (), {}),
        (MessageView, (7, MESSAGE), {"revoked": Revoke("a", Role.ADMIN), "is_read": False}),
        (Tombstone, (7, TombstoneReason.DELETED), {}),
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
    values = [getattr(MESSAGE, f.name) for f in dataclasses.fields(Message)][2:]
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
class _KeywordOnly:
    value: int = field(kw_only=True)


@pytest.mark.parametrize("cls", [_NoSlots, _NotFrozen, _Checked, _KeywordOnly, int])
def test_refuses_classes_it_could_build_wrong(cls: type) -> None:
    with pytest.raises(TypeError):
        quick_constructor(cls)
