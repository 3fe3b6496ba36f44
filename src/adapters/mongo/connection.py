"""One MongoDB client per opened backend: database by URL, schema setup, error translation."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from pymongo import IndexModel, MongoClient, ReturnDocument
from pymongo.collection import Collection
from pymongo.errors import (
    ConfigurationError,
    ConnectionFailure,
    DuplicateKeyError,
    NetworkTimeout,
    OperationFailure,
    PyMongoError,
)
from pymongo.monitoring import CommandListener

from imbucket.adapters import asyncio_bridge
from imbucket.adapters.mongo import commands
from imbucket.adapters.mongo.commands import Doc, FindAndUpdate
from imbucket.adapters.mongo.replies import (
    checked_layout,
    server_version,
    version_tuple,
)
from imbucket.adapters.timeouts import Timeouts
from imbucket.domain.errors import ConfigError, StoreUnavailable
from imbucket.domain.layout import BucketLayout


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Turn any driver failure inside the block into StoreUnavailable naming the action."""
    try:
        yield
    except NetworkTimeout as error:
        raise StoreUnavailable(f"MongoDB did not answer in time ({action}): {error}") from error
    except ConnectionFailure as error:
        # pymongo appends a long topology dump; the first clause says what went wrong.
        reason = str(error).split(", Timeout:")[0]
        raise StoreUnavailable(f"MongoDB is unreachable ({action}): {reason}") from error
    except PyMongoError as error:
        raise StoreUnavailable(f"MongoDB failed to {action}: {error}") from error


def _client(
    url: str, listeners: list[CommandListener], options: Doc, asynchronous: bool
) -> MongoClient[Doc]:
    """A MongoClient; when asynchronous, an AsyncMongoClient whose calls wait in the greenlet."""
    if not asynchronous:
        return MongoClient(url, event_listeners=listeners, **options)
    from pymongo import AsyncMongoClient

    # The facade answers every call this module and the stores make as MongoClient does.
    client = asyncio_bridge.Awaiting(AsyncMongoClient(url, event_listeners=listeners, **options))
    return cast("MongoClient[Doc]", client)


class MongoConnection:
    """A MongoClient and the database named by the URL path (default ``imbucket``).

    Construction does not touch the network; the first command does. Every wait is bounded
    by timeouts (``commands.client_options``) unless the URL says otherwise; a command with
    no reply in time fails as StoreUnavailable naming its action.
    ``event_listeners`` lets tests count the commands sent (round trips). asynchronous: the
    client is PyMongo's asyncio client behind ``asyncio_bridge.Awaiting``, and every call must
    run in a greenlet (``imbucket.aio``).
    """

    def __init__(
        self,
        url: str,
        event_listeners: Sequence[CommandListener] = (),
        timeouts: Timeouts | None = None,
        *,
        asynchronous: bool = False,
    ) -> None:
        url = url or commands.DEFAULT_URL
        self.timeouts = timeouts or Timeouts()
        options = commands.client_options(url, timeouts)
        try:
            self.client: MongoClient[Doc] = _client(
                url, list(event_listeners), options, asynchronous
            )
            self.db = self.client.get_default_database(commands.DEFAULT_DATABASE)
        except ConfigurationError as error:
            raise ConfigError(f"invalid MongoDB URL: {error}") from None
        self._info: dict[str, Any] | None = None

    def collection(self, name: str) -> Collection[Doc]:
        """A collection of this database."""
        return self.db[name]

    def scan(self, name: str, after: str | None, limit: int) -> tuple[list[Doc], str | None]:
        """The next page of name in key order (commands.scan), and its cursor.

        name: a collection, or ``commands.USERS_IN`` / ``CLAIMS_IN`` + a data collection. The
        cursor is the JSON of the last document's key; None when the page is short.
        """
        command = commands.scan(name, None if after is None else json.loads(after), limit)
        with translated(f"scan {name}"):
            found = list(
                self.db[commands.scanned_collection(name)]
                .find(command.filter, command.projection)
                .sort(command.sort)
                .limit(command.limit)
            )
        if len(found) < limit:
            return found, None
        return found, json.dumps(commands.key_of(found[-1], name))

    def ensure_indexes(self, name: str) -> None:
        """Create the collection's indexes (commands.INDEXES) if missing: one round trip."""
        specs = commands.INDEXES[name]
        if specs:
            models = [index_model(spec) for spec in specs]
            with translated(f"create the indexes of {name}"):
                self.collection(name).create_indexes(models)

    def ensure_claim_indexes(self, name: str) -> None:
        """Create the send claims' indexes in data collection name if missing: one round trip.

        With them the collection's own unique key (commands.INDEXES), which keeps two claims
        of one client_msg_id from both landing, whoever opens the collection first.
        """
        specs = (*commands.INDEXES[name], *commands.CLAIM_INDEXES)
        with translated(f"create the send claims' indexes of {name}"):
            self.collection(name).create_indexes([index_model(spec) for spec in specs])

    def index_names(self, name: str) -> set[str]:
        """The names of collection name's indexes (none when it does not exist): one round trip."""
        with translated(f"list the indexes of {name}"):
            return {index["name"] for index in self.collection(name).list_indexes()}

    def ensure_collection(self, name: str, options: Doc) -> Doc:
        """Create the collection with options unless it exists; the options it has.

        An existing collection is kept as it was created. A create that fails because
        another opener created the collection meanwhile (MongoDB: code 48, NamespaceExists)
        is that case too, recognised by the collection being there afterwards.
        """
        found = self._collection_options(name)
        if found is not None:
            return found
        with translated(f"create collection {name}"):
            try:
                self.db.create_collection(name, check_exists=False, **options)
            except OperationFailure:
                found = self._collection_options(name)
                if found is None:
                    raise
                return found
        return dict(options)

    def _collection_options(self, name: str) -> Doc | None:
        """The options of collection name, None when it does not exist: one round trip."""
        with translated(f"read the options of {name}"):
            found = list(self.db.list_collections(filter={"name": name}))
        return dict(found[0].get("options", {})) if found else None

    def is_clustered(self, name: str) -> bool:
        """Whether the existing collection name is clustered on _id."""
        return "clusteredIndex" in (self._collection_options(name) or {})

    def ensure_layout(self, collection: str, layout: BucketLayout) -> None:
        """Record layout.size for collection on first open; LayoutMismatch on another size."""
        recorded = self.find_and_update(
            commands.META, commands.record_layout(collection, layout.size), "record the layout"
        )
        checked_layout(recorded, layout.size, collection)

    def cache_binding(self, collection: str) -> MongoCacheBinding:
        """The cache binding record of collection's store (in the meta collection)."""
        return MongoCacheBinding(self, collection)

    def find_and_update(self, name: str, command: FindAndUpdate, action: str) -> Doc | None:
        """Run one FindAndUpdate command on collection name.

        Two first upserts of one key can collide on its unique index when the server does
        not retry them itself; the loser's second try then finds the winner's document.
        """
        with translated(action):
            try:
                return self._find_and_update(name, command)
            except DuplicateKeyError:
                if not command.upsert:
                    raise
                return self._find_and_update(name, command)

    def _find_and_update(self, name: str, command: FindAndUpdate) -> Doc | None:
        found: Doc | None = self.collection(name).find_one_and_update(
            command.filter,
            command.update,
            projection=command.projection or None,
            upsert=command.upsert,
            return_document=ReturnDocument.AFTER if command.return_new else ReturnDocument.BEFORE,
        )
        return found

    def version(self) -> tuple[int, ...]:
        """The server version as ints."""
        return version_tuple(self._build_info())

    def server_version(self) -> str:
        """What the server is, for ``imbucket backends`` (``replies.server_version``).

        ``MongoDB 7.0.12``, or an emulator speaking the wire protocol named as such.
        """
        return server_version(self._build_info())

    def _build_info(self) -> dict[str, Any]:
        """The server's buildInfo, asked once.

        Asked as the ``buildInfo`` command: pymongo's ``server_info()`` sends the legacy
        lower-case ``buildinfo``, which real servers accept and wire-protocol emulators
        (mongoeco) refuse.
        """
        if self._info is None:
            with translated("read the server version"):
                self._info = dict(self.client.admin.command("buildInfo"))
        return self._info

    def close(self) -> None:
        """Close the client (idempotent)."""
        self.client.close()


def index_model(spec: commands.IndexSpec) -> IndexModel:
    """The pymongo IndexModel of spec."""
    options: dict[str, Any] = {"unique": spec.unique}
    if spec.expire_after_seconds is not None:
        options["expireAfterSeconds"] = spec.expire_after_seconds
    if spec.sparse:
        options["sparse"] = True
    return IndexModel(list(spec.keys), **options)


class MongoCacheBinding:
    """CacheBindingRecord as a document of the meta collection, one per data collection."""

    def __init__(self, connection: MongoConnection, collection: str) -> None:
        self.connection = connection
        self.collection = collection

    def record(self, binding: str) -> str:
        """Record binding unless one is recorded (one upsert); the recorded binding."""
        command = commands.record_cache_binding(self.collection, binding)
        found = self.connection.find_and_update(commands.META, command, "record the cache")
        return str((found or {})["binding"])

    def replace(self, expected: str, binding: str) -> bool:
        """Compare-and-set in one update."""
        command = commands.replace_cache_binding(self.collection, expected, binding)
        found = self.connection.find_and_update(commands.META, command, "replace the cache")
        return found is not None
