"""The bulk loader leaves exactly the state ``ingest`` leaves, on every SQL row and MongoDB.

One tiny dataset goes into two empty stores of the same backend, one batch at a time through
``ingest`` and through ``imbucket.bench.bulk``; their dumps (every slot, counter, watermark
and send claim of every conversation) must be equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from imbucket.app import MessageService, open_service
from imbucket.bench import bulk
from imbucket.bench.dataset import SCALES, Dataset
from imbucket.testing.dump import dump
from tests.mongo import mongo_database
from tests.sql_servers import mariadb_database, mariadb_server, postgres_schema, postgres_server

ENGINES = ["sqlite", "postgres", "mariadb", "mongo"]
# Smaller than scale tiny: 1:1 chats and groups, batches interleaved, a few hundred messages.
DATASET = Dataset(
    replace(SCALES["tiny"], single_chats=12, groups=2, group_messages=400, users=30), seed=7
)


@contextmanager
def _empty_url(engine: str, folder: Path, name: str) -> Iterator[str]:
    if engine == "sqlite":
        yield f"sqlite:///{folder / (name + '.sqlite')}"
    elif engine == "postgres":
        with postgres_schema(postgres_server()) as url:
            yield url
    elif engine == "mariadb":
        with mariadb_database(mariadb_server()) as url:
            yield url
    else:
        with mongo_database() as url:
            yield url


def _state(service: MessageService) -> dict[str, object]:
    conversations = [c.id for c in DATASET.conversations]
    users = sorted({m for c in DATASET.conversations for m in c.members})[:12]
    return dump(service, conversations, users, ())


@contextmanager
def _ingested_and_empty(
    engine: str, layout: str, tmp_path: Path
) -> Iterator[tuple[MessageService, MessageService]]:
    """Two services of one backend: the whole dataset ingested batch by batch, and empty."""
    backend = f"{'mongo' if engine == 'mongo' else 'sql'}-{layout}"
    with ExitStack() as stack:
        urls = [stack.enter_context(_empty_url(engine, tmp_path, n)) for n in ("a", "b")]
        services = [
            stack.enter_context(open_service({"store": {"backend": backend, "url": url}}))
            for url in urls
        ]
        for batch in DATASET.batches():
            services[0].ingest(batch.conversation.id, DATASET.messages_of(batch))
        yield services[0], services[1]


@pytest.mark.parametrize("layout", ["row", "bucket"])
@pytest.mark.parametrize("engine", ENGINES)
def test_bulk_load_leaves_the_state_ingest_leaves(engine: str, layout: str, tmp_path: Path) -> None:
    with _ingested_and_empty(engine, layout, tmp_path) as (ingested, loaded):
        counted: list[int] = []
        written = bulk.load(loaded, DATASET, counted.append, chunk_messages=100)
        assert written == sum(counted) == DATASET.messages
        assert _state(loaded) == _state(ingested)


@pytest.mark.parametrize("layout", ["row", "bucket"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_bulk_loaded_prefix_then_ingest_leaves_the_state_ingest_leaves(
    engine: str, layout: str, tmp_path: Path
) -> None:
    """What the benchmark does before it times ``ingest``: the first batches in bulk."""
    first, rest = DATASET.preloaded_batches(), DATASET.ingested_batches()
    assert first and rest and first + rest == DATASET.batches()
    with _ingested_and_empty(engine, layout, tmp_path) as (ingested, split):
        written = bulk.load(split, DATASET, chunk_messages=100, batches=first)
        assert written == sum(b.size for b in first) < DATASET.messages
        last = {b.conversation.id: b.last for b in first}
        assert {c: split.max_seq(c) for c in last} == last  # ingest allocates from there on
        for batch in rest:
            result = split.ingest(batch.conversation.id, DATASET.messages_of(batch))
            assert len(result.inserted) == batch.size
        assert _state(split) == _state(ingested)
