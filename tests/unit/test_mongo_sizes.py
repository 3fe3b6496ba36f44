"""Every MongoDB command carrying many messages fits the server's limits (no server needed).

A document or a command over ``maxBsonObjectSize`` (16 MiB; a command may exceed it by the
16 KiB of its envelope) is refused every time. Measured with pymongo's own BSON encoder on
the largest messages the limits allow (imbucket.testing.factories.largest_message): a full bucket's
write and creation, and every row. ``insert_many`` and ``bulk_write`` of rows are split into
messages under ``maxMessageSizeBytes`` by pymongo itself, so only each document counts.
"""

from __future__ import annotations

import bson
import pytest

from imbucket.adapters.mongo import commands
from imbucket.app.registry import MONGO_MAX_DOCUMENT_BYTES
from imbucket.app.settings import load_settings
from imbucket.domain.budget import BucketBounds
from imbucket.domain.errors import ConfigError
from imbucket.domain.model import DEFAULT_LIMITS, Message, Slot
from imbucket.testing.factories import WIDE, largest_message

CONVERSATION = "sg_" + WIDE * (DEFAULT_LIMITS.max_id_length - 3)
BUCKET_SIZE = 100
COMMAND_ENVELOPE = 16 * 1024


@pytest.fixture(scope="module")
def bucket_of_largest() -> dict[int, Message]:
    return {i: largest_message(i + 1, CONVERSATION) for i in range(BUCKET_SIZE)}


def test_writing_a_full_bucket_of_the_largest_messages_is_one_command_that_fits(
    bucket_of_largest: dict[int, Message],
) -> None:
    write = commands.write_messages(f"{CONVERSATION}:0", bucket_of_largest)
    command = {"update": commands.BUCKETS, "updates": [{"q": write.filter, "u": write.update}]}
    size = len(bson.encode(command))
    assert size > BUCKET_SIZE * 70_000  # the messages are really at the limits
    assert size <= MONGO_MAX_DOCUMENT_BYTES + COMMAND_ENVELOPE


def test_a_new_bucket_of_the_largest_messages_stays_under_its_bound(
    bucket_of_largest: dict[int, Message],
) -> None:
    slots = {i: Slot(message=m) for i, m in bucket_of_largest.items()}
    document = commands.new_bucket(f"{CONVERSATION}:0", slots, BUCKET_SIZE)
    bound = BucketBounds.of(BUCKET_SIZE, DEFAULT_LIMITS)
    assert len(bson.encode(document)) <= bound.fixed_bytes <= MONGO_MAX_DOCUMENT_BYTES


def test_every_row_of_the_largest_batch_fits_a_document() -> None:
    fill = commands.fill_row(CONVERSATION, largest_message(1, CONVERSATION))
    statement = {"q": fill.filter, "u": fill.update, "upsert": True}
    assert len(bson.encode(statement)) <= DEFAULT_LIMITS.max_message_bytes + 1024


def test_a_bucket_bound_above_mongodb_document_limit_is_a_config_error() -> None:
    store = {"backend": "mongo-bucket", "max_bucket_bytes": MONGO_MAX_DOCUMENT_BYTES + 1}
    with pytest.raises(ConfigError, match="document limit"):
        load_settings({"store": store})
    load_settings({"store": {**store, "max_bucket_bytes": MONGO_MAX_DOCUMENT_BYTES}})
