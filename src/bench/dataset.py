"""A seeded, skewed chat dataset: many small 1:1 chats, some big groups, a few giant ones.

Everything derives from the seed, so every backend of a run (and every run with the same
seed and scale) sees exactly the same conversations, messages and delivery order.
Messages are generated on demand from (seed, conversation, seq). A batch's messages are kept
once generated when the dataset holds at most ``KEPT_MESSAGES_MAX`` messages (about 0.7 KiB
each), so the second and later backends of a run do not generate them again; a larger
dataset keeps nothing beyond the conversation list and the batch schedule.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from imbucket.bench.defaults import INGEST_TIMED_SHARE
from imbucket.bench.traffic import Shape, Traffic
from imbucket.domain.errors import ConfigError
from imbucket.domain.model import ContentType, Message, SessionType
from imbucket.domain.validation import check_message

# Up to this many messages (scale medium), a dataset keeps its batches' messages: ~0.7 GiB.
KEPT_MESSAGES_MAX = 1_100_000
_EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
_TEXT = (
    "ok yes no thanks lol see you tomorrow meeting lunch at noon sounds good please check the "
    "doc I'll be there in five minutes can you send it again where are we now sorry running "
    "late great idea let's do it who is coming tonight did you get my message call me when "
    "free happy birthday congrats the build is green again deploy after review haha sure"
)
_WORDS = _TEXT.split()
_IMAGE = (
    '{{"sourcePicture":{{"uuid":"{uuid}","type":"image/jpeg","size":{size},"width":1280,'
    '"height":960,"url":"https://cdn.example.com/img/{uuid}.jpg"}},"snapshotPicture":{{'
    '"width":320,"height":240,"url":"https://cdn.example.com/img/{uuid}_s.jpg"}}}}'
)


@dataclass(frozen=True, slots=True)
class Scale:
    """Shape of a dataset and how many operations each workload runs."""

    name: str
    single_chats: int
    single_mean: float  # mean messages per 1:1 chat (geometric)
    groups: int
    group_messages: int  # total messages of the ordinary groups (Pareto-shared)
    giants: tuple[int, ...]  # extra groups of exactly these sizes
    users: int
    ops: int  # operations per read or tag workload
    redeliveries: int  # batches delivered a second time
    hot_deleters: int  # users deleting the same hot message


SCALES: dict[str, Scale] = {
    "tiny": Scale("tiny", 60, 5, 4, 1_800, (), 200, 40, 40, 30),
    # From small up, hot_delete goes past the bucket stores' inline cap of 1,000 deleters.
    "small": Scale("small", 3_000, 8, 24, 66_000, (10_000,), 20_000, 400, 300, 1_300),
    "medium": Scale("medium", 30_000, 10, 200, 640_000, (60_000,), 200_000, 3_000, 3_000, 1_300),
    "large": Scale(
        "large", 150_000, 10, 800, 3_000_000, (200_000, 60_000), 1_000_000, 10_000, 10_000, 1_300
    ),
}


def _timed_count(batches: int) -> int:
    """How many of the last batches ``ingest`` times: at least one when there are any."""
    return min(batches, max(1, math.ceil(batches * INGEST_TIMED_SHARE)))


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation of the dataset and the users taking part."""

    id: str
    session_type: SessionType
    size: int
    members: tuple[str, ...]

    @property
    def is_group(self) -> bool:
        """Whether the conversation is a group chat."""
        return self.session_type == SessionType.GROUP


@dataclass(frozen=True, slots=True)
class Batch:
    """A consumer batch: consecutive seqs first..last of one conversation."""

    conversation: Conversation
    first: int
    last: int

    @property
    def size(self) -> int:
        """Number of messages in the batch."""
        return self.last - self.first + 1


class Dataset:
    """The conversations of one scale and seed, and their messages on demand."""

    def __init__(self, scale: Scale, seed: int = 42, traffic: Traffic | None = None) -> None:
        self.scale = scale
        self.seed = seed
        self.traffic = traffic or Traffic()
        self.shape: Shape = self.traffic.shape(scale)
        self.conversations = self._conversations()
        self._kept: dict[tuple[str, int, int], list[Message]] | None = (
            {} if self.messages <= KEPT_MESSAGES_MAX else None
        )
        self._checked: set[tuple[str, int, int]] = set()

    @cached_property
    def messages(self) -> int:
        """Total number of messages."""
        return sum(c.size for c in self.conversations)

    @cached_property
    def largest(self) -> Conversation:
        """The biggest conversation (a group)."""
        return max(self.conversations, key=lambda c: (c.size, c.id))

    def rng(self, purpose: str) -> random.Random:
        """A random stream of its own for one purpose, the same for every backend."""
        return random.Random(f"{self.seed}:{purpose}")

    def _conversations(self) -> list[Conversation]:
        s, rng = self.shape, self.rng("conversations")
        users = [f"u{n:07d}" for n in range(self.scale.users)]
        found: list[Conversation] = []
        seen: set[str] = set()
        if s.single_chats > len(users) * (len(users) - 1) // 2:
            raise ConfigError(f"{s.single_chats:,} 1:1 chats need more than {len(users):,} users")
        p = 1 / s.single_mean  # geometric sizes: most 1:1 chats hold a handful of messages
        while len(found) < s.single_chats:
            a, b = sorted(rng.sample(users, 2))
            conv_id = f"si_{a}_{b}"
            if conv_id in seen:
                continue
            seen.add(conv_id)
            draw = rng.random()
            size = 1 if p >= 1 else 1 + int(math.log(1 - draw) / math.log(1 - p))
            found.append(Conversation(conv_id, SessionType.SINGLE, size, (a, b)))
        # Pareto-shared group sizes: a few groups hold most of the messages.
        weights = [rng.paretovariate(s.group_skew) for _ in range(s.groups)]
        total = sum(weights) or 1.0
        sizes = [max(50, int(s.group_messages * w / total)) for w in weights]
        sizes += list(s.giants)
        for n, size in enumerate(sizes):
            members = max(3, min(len(users), size // 4, 2_000))
            found.append(
                Conversation(
                    f"sg_group{n:05d}",
                    SessionType.GROUP,
                    size,
                    tuple(rng.sample(users, members)),
                )
            )
        return found

    def batches(self) -> list[Batch]:
        """Consumer batches (≤100 per conversation), interleaved across conversations.

        Each conversation's batches keep their order; conversations are interleaved at
        random, as messages of many chats arrive together in real traffic.
        """
        rng = self.rng("batches")
        per_conversation: list[list[Batch]] = []
        for conv in self.conversations:
            upper = 100 if conv.is_group else 10
            batches, seq = [], 1
            while seq <= conv.size:
                last = min(conv.size, seq + rng.randint(1, upper) - 1)
                batches.append(Batch(conv, seq, last))
                seq = last + 1
            per_conversation.append(batches)
        order = [n for n, batches in enumerate(per_conversation) for _ in batches]
        rng.shuffle(order)
        cursors = [0] * len(per_conversation)
        schedule = []
        for n in order:
            schedule.append(per_conversation[n][cursors[n]])
            cursors[n] += 1
        return schedule

    def preloaded_batches(self) -> list[Batch]:
        """The batches loaded in bulk (untimed) before ``ingest`` times the rest."""
        batches = self.batches()
        return batches[: len(batches) - _timed_count(len(batches))]

    def ingested_batches(self) -> list[Batch]:
        """The batches ``ingest`` times: the last ``INGEST_TIMED_SHARE`` of the arrival order."""
        batches = self.batches()
        return batches[len(batches) - _timed_count(len(batches)) :]

    def sender(self, conv: Conversation, seq: int) -> str:
        """Who sent seq (a few members do most of the talking in groups)."""
        unit = (zlib.crc32(f"{self.seed}:{conv.id}:{seq}".encode()) + 0.5) / 2**32
        if not conv.is_group:
            return conv.members[int(unit * 2)]
        index = int(-math.log(unit) * len(conv.members) / 8)
        return conv.members[min(len(conv.members) - 1, index)]

    def message(self, conv: Conversation, seq: int) -> Message:
        """The message at seq, the same on every call."""
        rng = random.Random(f"{self.seed}:{conv.id}:{seq}")
        sender = self.sender(conv, seq)
        sent = _EPOCH_MS + seq * 30_000 + rng.randrange(30_000)
        content, content_type = _content(rng, self.shape)
        other = "" if conv.is_group else next(m for m in conv.members if m != sender)
        return Message(
            conversation_id=conv.id,
            seq=seq,
            send_id=sender,
            recv_id=other,
            group_id=conv.id[3:] if conv.is_group else "",
            client_msg_id=f"c{rng.getrandbits(64):016x}",
            server_msg_id=f"s{rng.getrandbits(64):016x}",
            session_type=conv.session_type,
            content_type=content_type,
            content=content,
            send_time=sent,
            create_time=sent + rng.randrange(50),
            sender_nickname=f"User {sender[1:]}",
            sender_platform_id=rng.choice((1, 2, 3, 5)),
        )

    def messages_of(self, batch: Batch) -> list[Message]:
        """The messages of a batch (a new list each call; the messages are immutable)."""
        key = (batch.conversation.id, batch.first, batch.last)
        kept = self._kept.get(key) if self._kept is not None else None
        if kept is None:
            kept = [self.message(batch.conversation, s) for s in range(batch.first, batch.last + 1)]
            if self._kept is not None:
                self._kept[key] = kept
        return list(kept)

    def checked_messages_of(self, batch: Batch) -> list[Message]:
        """messages_of(batch), each passed through ``check_message``.

        Checked once per batch when the dataset keeps its messages (they cannot change), at
        every call otherwise.
        """
        key = (batch.conversation.id, batch.first, batch.last)
        messages = self.messages_of(batch)
        if key not in self._checked:
            messages = [check_message(m, batch.conversation.id) for m in messages]
            if self._kept is not None:
                self._checked.add(key)
        return messages

    def iter_messages(self) -> Iterator[Message]:
        """Every message, conversation by conversation (for sizing)."""
        for conv in self.conversations:
            for seq in range(1, conv.size + 1):
                yield self.message(conv, seq)

    def reported_traffic(self) -> Traffic | None:
        """The traffic as the report states it (its mix filled in), None for the built-in."""
        if self.traffic.is_default:
            return None
        return replace(self.traffic, mix=self.traffic.weights())

    def summary(self) -> dict[str, int]:
        """Shape of the dataset for the report (``results.DatasetSummary`` without traffic)."""
        sizes = sorted(c.size for c in self.conversations)
        groups = [c.size for c in self.conversations if c.is_group]
        return {
            "conversations": len(sizes),
            "single_chats": len(sizes) - len(groups),
            "groups": len(groups),
            "messages": self.messages,
            "largest_conversation": self.largest.size,
            "median_conversation": sizes[len(sizes) // 2],
            "group_messages": sum(groups),
            "users": self.scale.users,
            "seed": self.seed,
        }


def _content(rng: random.Random, shape: Shape) -> tuple[str, int]:
    """Text of log-normal length (median ≈ 30 chars, long tail), or now and then a picture."""
    if rng.random() < shape.picture_share:
        uuid = f"{rng.getrandbits(128):032x}"
        return _IMAGE.format(uuid=uuid, size=rng.randrange(20_000, 3_000_000)), 102
    spread = rng.lognormvariate(math.log(shape.text_median), shape.text_sigma)
    length = min(shape.text_max, max(1, int(spread)))
    words: list[str] = []
    used = 0
    while used < length:
        word = rng.choice(_WORDS)
        words.append(word)
        used += len(word) + 1
    return " ".join(words)[:length], int(ContentType.TEXT)
