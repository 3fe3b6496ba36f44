"""Quick constructors for the frozen dataclasses a read builds by the thousand.

A frozen dataclass's ``__init__`` sets every field through ``object.__setattr__``, one call
per field, to get past its own frozen ``__setattr__``: for ``Message``'s 17 fields that is
most of what decoding a pulled message costs. ``quick_constructor(cls)`` returns a function
that builds the same instance with plain attribute stores on an unfrozen twin class of the
same memory layout (the same ``__slots__``), then makes it a ``cls``: the result is an
ordinary frozen ``cls`` instance, equal, hashed and immutable like one made by ``cls(...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def shared_fields(cls: type[T]) -> type[T]:
    """Make a frozen dataclass a base that only declares fields its subclasses share.

    cls must declare ``__slots__ = ()``: it holds no storage and is never instantiated; each
    subclass (a frozen dataclass with slots) stores the fields and has its own frozen
    ``__setattr__`` and ``__delattr__``. The base's own are removed, so that a quick
    constructor's unfrozen twin, which must have the same base, stores at C speed.
    """
    if cls.__dict__.get("__slots__") != () or not getattr(cls, "__dataclass_params__", None):
        raise TypeError(f"{cls.__name__} is not a dataclass declaring __slots__ = ()")
    for name in ("__setattr__", "__delattr__"):
        if name in cls.__dict__:
            delattr(cls, name)
    return cls


def quick_constructor(cls: type[T]) -> Callable[..., T]:
    """A function taking ``cls``'s ``__init__`` arguments and returning what ``cls(...)`` does.

    The arguments go in ``__init__``'s order, keyword-only fields too (after the others).
    cls must be a frozen dataclass with slots, no ``__post_init__``, no ``init=False``
    field, and a base that is ``object`` or a ``shared_fields`` class (raises TypeError
    otherwise). Its ``__init__`` runs no checks either, so the two are interchangeable.
    """
    params = getattr(cls, "__dataclass_params__", None)
    slots = cls.__dict__.get("__slots__")
    if not is_dataclass(cls) or params is None or not params.frozen or slots is None:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__ a quick constructor would skip")
    if any(not field.init for field in fields(cls)):
        raise TypeError(f"{cls.__name__} has init=False fields")
    base: type = cls.__mro__[1]
    if base is not object and (base.__dict__.get("__slots__") != () or "__setattr__" in vars(base)):
        raise TypeError(f"{cls.__name__}'s base {base.__name__} is not a shared_fields class")
    names: dict[str, Any] = {
        "_new": object.__new__,
        "_cls": cls,
        "_twin": type(f"_Unfrozen{cls.__name__}", (base,), {"__slots__": tuple(slots)}),
    }
    signature, body = [], []
    for field in init_order(cls):
        name = field.name
        if field.default is not MISSING:
            names[f"_default_{name}"] = field.default
            signature.append(f"{name}=_default_{name}")
            body.append(f" o.{name} = {name}")
        elif field.default_factory is not MISSING:
            names[f"_factory_{name}"] = field.default_factory
            signature.append(f"{name}=_MISSING")
            body.append(f" o.{name} = _factory_{name}() if {name} is _MISSING else {name}")
        else:
            signature.append(name)
            body.append(f" o.{name} = {name}")
    names["_MISSING"] = MISSING
    header = [f"def construct({', '.join(signature)}):", " o = _new(_twin)"]
    source = "\n".join([*header, *body, " o.__class__ = _cls", " return o"])
    exec(source, names)  # built from the dataclass's own field names only
    construct: Callable[..., T] = names["construct"]
    construct.__qualname__ = construct.__name__ = f"quick_{cls.__name__}"
    return construct


def init_order(cls: type) -> tuple[Field[Any], ...]:
    """The dataclass fields of cls in its ``__init__``'s order: keyword-only ones last."""
    every = fields(cls)
    return tuple(f for f in every if not f.kw_only) + tuple(f for f in every if f.kw_only)
