"""ViewReads for the MongoDB backends: a pull's watermarks and slots in one aggregate.

The aggregate starts on the data collection (the viewer's user document, ``UserDocs``),
unions the conversation's counter from ``seq``, computes the seqs the pull may show, and
joins the buckets or rows holding them (``commands.bucket_view`` / ``commands.row_view``):
one round trip. For
buckets the same aggregate looks up the viewer's own side-table entry in every slot
flagged as having spilled deleters, which ``BucketMessageStore.viewed`` (the one
home of that rule) merges: a spilled slot costs no second round trip either.
"""

from __future__ import annotations

from collections.abc import Callable

from imbucket.adapters.bucket import BucketMessageStore
from imbucket.adapters.mongo import commands, replies
from imbucket.adapters.mongo.commands import Doc
from imbucket.adapters.mongo.connection import MongoConnection, translated
from imbucket.domain.model import Pick, Watermarks
from imbucket.ports.view_reads import View


class MongoBucketViews:
    """ViewReads over collections ``seq`` and ``msg``."""

    def __init__(self, connection: MongoConnection, store: BucketMessageStore) -> None:
        self._connection = connection
        self._store = store

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """One aggregate; see ViewReads.view."""
        size = self._store.layout.size
        pipeline = commands.bucket_view(conversation_id, viewer_id, pick, size)
        marks, buckets = _run(self._connection, commands.BUCKETS, pipeline, pick)
        viewed, spilled = replies.viewed_bucket_seqs(conversation_id, buckets)
        seqs = pick.of(marks)
        return marks, self._store.viewed_seqs(conversation_id, seqs, viewed, viewer_id, spilled)


class MongoRowViews:
    """ViewReads over collections ``seq`` and ``msg_row``."""

    def __init__(self, connection: MongoConnection) -> None:
        self._connection = connection

    def view(self, conversation_id: str, viewer_id: str, pick: Pick) -> View:
        """One aggregate; see ViewReads.view."""
        if pick.latest:
            pipeline = commands.row_view(conversation_id, viewer_id, pick)
            marks, rows = _run(self._connection, commands.ROWS, pipeline, pick)
        else:
            pipeline = commands.listed_row_view(conversation_id, viewer_id, pick.seqs)
            marks, rows = _run(self._connection, commands.ROWS, pipeline, pick, replies.union_reply)
        found = replies.row_slots(rows)
        shown = set(pick.of(marks))
        return marks, {s: slot for s, slot in found.items() if s in shown and not slot.is_empty}


def _run(
    connection: MongoConnection,
    collection: str,
    pipeline: list[Doc],
    pick: Pick,
    reply: Callable[[list[Doc]], tuple[Watermarks, list[Doc]]] = replies.view_reply,
) -> tuple[Watermarks, list[Doc]]:
    """Run a view aggregate on the data collection: the marks and the buckets or rows found.

    The whole reply comes in the first batch (at most the marks and one document per wanted
    seq), unless it exceeds the server's reply size (16 MiB): then the driver fetches the rest.
    The batch holds one document more than the reply can have: a server that fills a batch
    exactly may keep the cursor open, and the driver would send a getMore to find it empty.
    """
    batch = max(pick.latest, len(pick.seqs)) + 2
    with translated("read a view"):
        found = list(connection.collection(collection).aggregate(pipeline, batchSize=batch))
    return reply(found)
