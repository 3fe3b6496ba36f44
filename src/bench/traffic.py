"""A team's own traffic: the shape of the benchmark's chats, read from a ``[traffic]`` table.

Every parameter is optional; what is left out keeps the scale's value (sizes and counts) or
the built-in default (lengths, skew, mix), so an empty table is the built-in dataset exactly.
``imbucket profile`` derives such a table from an existing store (``imbucket.bench.profile``).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from imbucket.domain.errors import ConfigError

# How the reads of the default mix split between the workloads that only read.
_READ_SPLIT = {"pull_latest": 0.8, "pull_range": 0.17, "pull_scattered": 0.03}
# How the writes of the default mix split: sends dominate, tags follow read receipts.
_WRITE_SPLIT = {
    "ingest": 0.6,
    "mark_read": 0.25,
    "delete_for_me": 0.08,
    "revoke": 0.04,
    "clear_small": 0.02,
    "purge": 0.01,
}
DEFAULT_READ_SHARE = 0.7


def default_mix(read_share: float = DEFAULT_READ_SHARE) -> dict[str, float]:
    """Operation weights per workload: read_share of them reads, the rest writes."""
    mix = {name: read_share * share for name, share in _READ_SPLIT.items()}
    mix.update({name: (1 - read_share) * share for name, share in _WRITE_SPLIT.items()})
    return {name: round(weight, 4) for name, weight in mix.items()}


@dataclass(frozen=True, slots=True)
class Shape:
    """The concrete shape of a dataset: every count and distribution parameter resolved."""

    single_chats: int
    single_mean: float
    groups: int
    group_messages: int
    group_skew: float
    giants: tuple[int, ...]
    text_median: float
    text_sigma: float
    text_max: int
    picture_share: float


@dataclass(frozen=True, slots=True)
class Traffic:
    """What a team says about its chats; None keeps the scale's value.

    single_chats, single_mean: how many 1:1 chats and their mean size (geometric law).
    groups, group_share: how many ordinary groups and the share of all messages that are
    group messages (giants included); group_skew is the Pareto exponent sharing the group
    messages (lower: a few groups hold more); giants are extra groups of exactly these sizes.
    text_median, text_sigma, text_max: log-normal message length in characters.
    picture_share: share of picture messages. read_share and mix: the operation mix, as the
    share of reads or as weights per workload name (mix wins).
    """

    single_chats: int | None = None
    single_mean: float | None = None
    groups: int | None = None
    group_share: float | None = None
    group_skew: float = 1.2
    giants: tuple[int, ...] | None = None
    text_median: float = 30.0
    text_sigma: float = 1.0
    text_max: int = 4_000
    picture_share: float = 0.04
    read_share: float = DEFAULT_READ_SHARE
    mix: Mapping[str, float] = field(default_factory=dict)
    source: str = ""  # where the shape came from, for the report; "" is the built-in one

    @property
    def is_default(self) -> bool:
        """Whether this is the built-in traffic (the report then says nothing about it)."""
        return self == Traffic()

    def weights(self) -> dict[str, float]:
        """The operation mix by workload name."""
        return dict(self.mix) if self.mix else default_mix(self.read_share)

    def shape(self, scale: Any) -> Shape:
        """Resolve against a Scale: the scale gives what this traffic leaves out."""
        singles = scale.single_chats if self.single_chats is None else self.single_chats
        mean = scale.single_mean if self.single_mean is None else self.single_mean
        groups = scale.groups if self.groups is None else self.groups
        giants = tuple(scale.giants if self.giants is None else self.giants)
        group_messages = scale.group_messages
        if self.group_share is not None:
            single_messages = singles * mean
            wanted = single_messages * self.group_share / (1 - self.group_share)
            group_messages = max(0, round(wanted) - sum(giants))
        return Shape(
            singles,
            mean,
            groups,
            group_messages,
            self.group_skew,
            giants,
            self.text_median,
            self.text_sigma,
            self.text_max,
            self.picture_share,
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (results.json), parameters left to the scale omitted."""
        data = asdict(self)
        data["giants"] = None if self.giants is None else list(self.giants)
        data["mix"] = self.weights()
        return {k: v for k, v in data.items() if v is not None}


_FLOATS = ("single_mean", "group_share", "group_skew", "text_median", "text_sigma")
_INTS = ("single_chats", "groups", "text_max")
_KNOWN = {f.name for f in fields(Traffic)} - {"source"}


def parse_traffic(
    data: object, source: str = "", known_workloads: Collection[str] | None = None
) -> Traffic:
    """A Traffic from a ``[traffic]`` table; ConfigError naming the first bad key.

    known_workloads: the workload names a ``mix`` may weigh (None: any name).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"traffic must be a table, got {type(data).__name__}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise ConfigError(f"unknown traffic keys {unknown}; known: {sorted(_KNOWN)}")
    values: dict[str, Any] = {"source": source}
    for key in _INTS:
        if key in data:
            values[key] = _number(data, key, int, minimum=1)
    for key in (*_FLOATS, "picture_share", "read_share"):
        if key in data:
            values[key] = _number(data, key, float, minimum=0.0)
    _check_ranges(values)
    if "giants" in data:
        giants = data["giants"]
        if not isinstance(giants, list):
            raise ConfigError("traffic.giants must be a list of group sizes")
        values["giants"] = tuple(_positive_int(g, "traffic.giants") for g in giants)
    if "mix" in data:
        values["mix"] = _mix(data["mix"], known_workloads)
    return Traffic(**values)


def _number(data: Mapping[str, Any], key: str, kind: type, minimum: float) -> Any:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"traffic.{key} must be a number, got {value!r}")
    if kind is int and value != int(value):
        raise ConfigError(f"traffic.{key} must be a whole number, got {value!r}")
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"traffic.{key} must be at least {minimum}, got {value!r}")
    return kind(value)


def _check_ranges(values: dict[str, Any]) -> None:
    for key in ("group_share", "picture_share", "read_share"):
        if key in values and not values[key] <= 1:
            raise ConfigError(f"traffic.{key} is a share between 0 and 1, got {values[key]}")
    if values.get("group_share") == 1:
        raise ConfigError("traffic.group_share must be below 1 (1:1 chats need some messages)")
    for key in ("single_mean", "text_median"):
        if key in values and values[key] < 1:
            raise ConfigError(f"traffic.{key} must be at least 1, got {values[key]}")
    if "group_skew" in values and values["group_skew"] <= 0:
        raise ConfigError(f"traffic.group_skew must be above 0, got {values['group_skew']}")


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what} must hold whole numbers ≥ 1, got {value!r}")
    return value


def _mix(data: object, known: Collection[str] | None) -> dict[str, float]:
    if not isinstance(data, Mapping) or not data:
        raise ConfigError("traffic.mix must be a table of workload = weight")
    mix: dict[str, float] = {}
    for name in data:
        if known is not None and name not in known:
            raise ConfigError(f"traffic.mix: unknown workload {name!r}; known: {tuple(known)}")
        mix[name] = _number(data, name, float, minimum=0.0)
    if not sum(mix.values()) > 0:
        raise ConfigError("traffic.mix needs some weight above 0")
    return mix


def read_document(path: Path, what: str) -> Any:
    """The content of a TOML file (``.toml``) or else a JSON file; ConfigError naming what."""
    try:
        text = path.read_text()
        return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {what} {path}: {error}") from None


def load_traffic(path: Path, known_workloads: Collection[str] | None = None) -> Traffic:
    """The ``[traffic]`` table of a TOML or JSON file (the whole file when it has none)."""
    data = read_document(path, "traffic file")
    if isinstance(data, dict) and "traffic" in data:
        data = data["traffic"]
    return parse_traffic(data, str(path), known_workloads)


def to_toml(traffic: Traffic, comment: str = "") -> str:
    """A ``[traffic]`` table for a bench config file (what ``imbucket profile`` writes)."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append("[traffic]")
    for key, value in traffic.as_dict().items():
        if key in {"source", "mix"}:
            continue
        lines.append(f"{key} = {_toml_value(value)}")
    lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}" if "e" not in f"{value:g}" else repr(value)
    return json.dumps(value)
