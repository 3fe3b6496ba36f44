"""``imbucket profile``: derive a team's traffic shape from a store it already runs.

The store's public API cannot list conversations (the ports have no scan), so the request
names them: a list in the request file, or a file of ids, one per line. For each one the
profile reads ``max_seq`` (its size) and pulls its latest ``sample`` messages (their
session type, text lengths and picture share). Nothing is written. What a store cannot tell
(the read/write mix) keeps the built-in default.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imbucket.app.service import MessageService
from imbucket.bench.traffic import Traffic, read_document
from imbucket.domain.errors import ConfigError, ImbucketError
from imbucket.domain.model import ContentType, SessionType
from imbucket.domain.projection import MessageView

GIANT = 10  # a group at least this many times the median group is a giant
MAX_GIANTS = 3
DEFAULT_SAMPLE = 50
MAX_CONVERSATIONS = 1_000_000
PICTURE = 102  # OpenIM's picture content type


@dataclass(frozen=True, slots=True)
class Request:
    """Which store to profile, which conversations, and how much to sample of each."""

    store: dict[str, Any]
    conversations: tuple[str, ...]
    sample: int = DEFAULT_SAMPLE
    messages: int = 0  # scale the counts so the dataset holds about this many (0: as found)
    viewer: str = "imbucket-profile"

    def store_config(self) -> dict[str, Any]:
        """The open_service config of the store (no cache: the profile reads the store)."""
        return {"store": dict(self.store), "cache": {"backend": "none"}}


def load_request(path: Path) -> Request:
    """Read a TOML/JSON file with a ``[store]`` table and a ``[profile]`` table."""
    data = read_document(path, "profile config")
    store, wanted = data.get("store"), data.get("profile", {})
    if not isinstance(store, dict) or "backend" not in store:
        raise ConfigError(f"{path}: a [store] table with a backend is required")
    if not isinstance(wanted, dict):
        raise ConfigError(f"{path}: [profile] must be a table")
    ids = list(wanted.get("conversations", []))
    if "conversations_file" in wanted:
        listed = path.parent / str(wanted["conversations_file"])
        try:
            ids += [line.strip() for line in listed.read_text().splitlines() if line.strip()]
        except OSError as error:
            raise ConfigError(f"cannot read {listed}: {error}") from None
    return request(store, ids, wanted)


def request(store: dict[str, Any], ids: Sequence[object], wanted: dict[str, Any]) -> Request:
    """A checked Request; ConfigError on no or too many ids, or bad numbers."""
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise ConfigError("profile needs conversation ids (profile.conversations or a file)")
    if len(ids) > MAX_CONVERSATIONS:
        raise ConfigError(f"profile reads at most {MAX_CONVERSATIONS:,} conversations")
    sample, messages = wanted.get("sample", DEFAULT_SAMPLE), wanted.get("messages", 0)
    for key, value, least in (("sample", sample, 1), ("messages", messages, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"profile.{key} must be a whole number ≥ {least}, got {value!r}")
    if sample > 1_000:
        raise ConfigError("profile.sample must be at most 1000 (one pull)")
    viewer = str(wanted.get("viewer", "imbucket-profile"))
    return Request(dict(store), tuple(dict.fromkeys(str(i) for i in ids)), sample, messages, viewer)


@dataclass
class Profile:
    """What the sampled conversations hold."""

    single_sizes: list[int] = field(default_factory=list)
    group_sizes: list[int] = field(default_factory=list)
    text_lengths: list[int] = field(default_factory=list)
    pictures: int = 0
    sampled: int = 0
    empty: int = 0  # named conversations holding no message

    def add(self, size: int, views: Iterable[MessageView], group: bool) -> None:
        """Count one conversation of size messages and its sampled views."""
        (self.group_sizes if group else self.single_sizes).append(size)
        for view in views:
            self.sampled += 1
            if view.content_type == ContentType.TEXT:
                self.text_lengths.append(len(view.content))
            elif view.content_type == PICTURE:
                self.pictures += 1

    def summary(self) -> str:
        """A comment line for the written table."""
        return (
            f"imbucket profile: {len(self.single_sizes):,} 1:1 chats and "
            f"{len(self.group_sizes):,} groups holding {self.messages:,} messages; "
            f"{self.sampled:,} messages sampled"
            + (f"; {self.empty:,} named conversations were empty" if self.empty else "")
        )

    @property
    def messages(self) -> int:
        """Messages of every profiled conversation."""
        return sum(self.single_sizes) + sum(self.group_sizes)

    def traffic(self, messages: int = 0) -> Traffic:
        """The shape found, counts scaled so that the dataset holds about messages (0: all)."""
        total = self.messages
        if not total:
            raise ConfigError("the profiled conversations hold no message")
        factor = min(1.0, messages / total) if messages else 1.0
        ordinary, giants = _split_giants(self.group_sizes)
        singles = self.single_sizes or [1]
        share = min(0.99, sum(self.group_sizes) / total)
        median, sigma = _lognormal(self.text_lengths)
        return Traffic(
            single_chats=max(1, round(len(singles) * factor)),
            single_mean=round(max(1.0, statistics.fmean(singles)), 2),
            groups=max(1, round(len(ordinary) * factor)),
            group_share=round(share, 4),
            group_skew=round(_pareto(ordinary), 3),
            giants=tuple(max(1, round(g * factor)) for g in giants),
            text_median=round(median, 1),
            text_sigma=round(sigma, 3),
            text_max=max(self.text_lengths, default=4_000),
            picture_share=round(self.pictures / self.sampled, 4) if self.sampled else 0.04,
        )


def profile(service: MessageService, req: Request) -> Profile:
    """Read each named conversation's size and sample its latest messages."""
    found = Profile()
    for conversation in req.conversations:
        size = service.max_seq(conversation)
        if not size:
            found.empty += 1
            continue
        try:
            entries = service.pull_latest(conversation, req.viewer, min(req.sample, size))
        except ImbucketError:
            entries = []  # a conversation the viewer may not read still has a size
        views = [e for e in entries if isinstance(e, MessageView)]
        group = _is_group(conversation, views)
        found.add(size, views, group)
    return found


def _is_group(conversation: str, views: list[MessageView]) -> bool:
    if views:
        return views[0].message.session_type in {SessionType.GROUP, SessionType.WRITE_GROUP}
    return conversation.startswith("sg_")  # OpenIM's conversation id prefix of groups


def _split_giants(sizes: list[int]) -> tuple[list[int], list[int]]:
    """Ordinary groups, and the few giants far above the median group."""
    if len(sizes) < 3:
        return sizes, []
    median = statistics.median(sizes)
    ranked = sorted(sizes, reverse=True)
    giants = [s for s in ranked[:MAX_GIANTS] if s >= GIANT * median]
    rest = list(sizes)
    for giant in giants:
        rest.remove(giant)
    return rest, giants


def _pareto(sizes: list[int]) -> float:
    """Maximum-likelihood Pareto exponent of group sizes (1.2 when it cannot be told)."""
    smallest = min(sizes, default=0)
    logs = sum(math.log(s / smallest) for s in sizes) if smallest else 0.0
    if len(sizes) < 3 or logs <= 0:
        return 1.2
    return min(5.0, max(0.3, len(sizes) / logs))


def _lognormal(lengths: list[int]) -> tuple[float, float]:
    """Median and log-sigma of text lengths (30 and 1.0 when nothing was sampled)."""
    if len(lengths) < 2:
        return 30.0, 1.0
    ordered = sorted(max(1, n) for n in lengths)
    median = float(statistics.median(ordered))
    low = ordered[int(0.16 * (len(ordered) - 1))]
    high = ordered[int(0.84 * (len(ordered) - 1))]
    return max(1.0, median), max(0.0, (math.log(high) - math.log(low)) / 2)
