"""What a failed SQL statement means: its fault, how often it is retried, the error it becomes.

Transient failures are tried again a bounded number of times (see docs/faults.md): a connection
that could not be opened, a deadlock, and a connection lost mid-way. A lost connection leaves
the outcome of the statement in flight unknown, so that one is repeated only for work declared
idempotent (``Failure.retryable``); other work then raises OutcomeUnknown. Faults of the
configuration (a wrong database, login or schema) are ConfigErrors at once, with the fix.
"""

from __future__ import annotations

import enum
import random
import re

from sqlalchemy.exc import DataError, DBAPIError, SQLAlchemyError

from imbucket.domain.errors import (
    ConfigError,
    InvalidArgument,
    OutcomeUnknown,
    StoreUnavailable,
    WriteRefused,
)


class Fault(enum.Enum):
    """A transient failure of one attempt, and what it leaves behind."""

    UNREACHABLE = "could not connect"  # nothing was sent, or the server refused it unrun
    ROLLED_BACK = "connection lost inside a transaction"  # the server rolled it back
    LOST = "connection lost"  # the statement in flight may or may not have been applied
    CONTENTION = "deadlock or lock timeout"  # the engine undid the statement and asks again


# Attempts in all (the first one included) before a fault becomes the caller's error. A lost
# connection is usually one stale pooled connection (the server restarted or killed it):
# the second attempt opens a new one. Deadlocks clear up by themselves, given a few tries.
ATTEMPTS: dict[Fault, int] = {
    Fault.UNREACHABLE: 3,
    Fault.ROLLED_BACK: 3,
    Fault.LOST: 3,
    Fault.CONTENTION: 8,
}
# Several MariaDB servers named in one URL are the masters of a Galera cluster: writers on
# other nodes make certification failures far likelier than local deadlocks, and a hot row
# (a conversation's seq counter, a group's bucket) can lose several rounds in a row.
MULTI_MASTER_CONTENTION_ATTEMPTS = 32
# Full jitter: after attempt k, a random wait of 0 .. 2 ms * 2**(k - 1), at most 250 ms.
_WAIT_BASE = 0.002
WAIT_MAX = 0.25
# Deadlocks and lock timeouts are the engine asking us to try again.
_RETRY_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock (PostgreSQL)
# Lock wait timeout, deadlock (MariaDB); on Galera, 1213 is also a certification failure:
# another node committed a conflicting write first, and this transaction was rolled back.
# 1684: a table skipped while a concurrent DDL changes it (Galera replicates every
# CREATE TABLE IF NOT EXISTS of a store being opened on another node).
_RETRY_MYSQL_CODES = frozenset({1205, 1213, 1684})
# A Galera node outside the primary component refuses every statement unrun ("WSREP has not
# yet prepared node for application use"): the connection is dropped, the next goes elsewhere.
NOT_READY_MYSQL_CODES = frozenset({1047})
# A statement over MariaDB's max_allowed_packet; the same from SQLite and psycopg by message.
_TOO_LARGE_MYSQL_CODES = frozenset({1153, 1301})
_TOO_LARGE_SIGNS = ("too many SQL variables", "string or blob too big", "number of parameters")
# Faults of the configuration, not of the moment: another attempt fails the same way, so
# they are ConfigErrors at once, with the fix. What each class of fault asks the user to do:
_FIX_DATABASE = "create that database, or name an existing one in store.url"
_FIX_LOGIN = "check the user and password in store.url and what the server grants them"
_FIX_SCHEMA = (
    "create the schema search_path names (CREATE SCHEMA …), or point search_path in "
    "store.url (options=-csearch_path=…) at an existing one"
)
FIX_NO_DATABASE = "name a database in store.url (mysql+pymysql://user@host/<database>)"
_CONFIG_SQLSTATES = {
    "3D000": _FIX_DATABASE,  # invalid_catalog_name
    "28000": _FIX_LOGIN,  # invalid_authorization_specification
    "28P01": _FIX_LOGIN,  # invalid_password
    "3F000": _FIX_SCHEMA,  # invalid_schema_name
}
_CONFIG_MYSQL_CODES = {
    1049: _FIX_DATABASE,  # unknown database
    1044: _FIX_LOGIN,  # access denied to the database
    1045: _FIX_LOGIN,  # access denied (password)
    1698: _FIX_LOGIN,  # access denied (no password)
    1046: FIX_NO_DATABASE,  # no database selected
}
# libpq reports a refused connection by its message only, without the SQLSTATE.
_CONFIG_POSTGRES_SIGNS = (
    (re.compile(r'database "[^"]*" does not exist'), _FIX_DATABASE),
    (re.compile(r'role "[^"]*" does not exist'), _FIX_LOGIN),
    (re.compile(r"password authentication failed|no pg_hba\.conf entry"), _FIX_LOGIN),
)


class CommitFailed(Exception):
    """COMMIT itself failed: the transaction may or may not have been committed."""

    def __init__(self, error: SQLAlchemyError) -> None:
        super().__init__(str(error))
        self.error = error


class Failure(Exception):
    """One attempt failed transiently: the driver error and its fault."""

    def __init__(self, fault: Fault, error: SQLAlchemyError) -> None:
        super().__init__(str(error))
        self.fault = fault
        self.error = error
        self.timeout: float | None = None  # set when no reply came within this many seconds

    @property
    def reason(self) -> str:
        """What went wrong, for messages."""
        if self.timeout is not None:
            return f"no reply within {self.timeout:g} s (store.statement_timeout_seconds)"
        return describe(self.error)

    @classmethod
    def of(cls, error: SQLAlchemyError, *, committing: bool) -> Failure:
        """Classify an error raised while work ran (committing: its outcome can be unknown).

        Raises the caller's error at once when it is not transient.
        """
        if isinstance(error, DBAPIError):
            if _contention(error):
                return cls(Fault.CONTENTION, error)
            if mysql_code(error) in NOT_READY_MYSQL_CODES:
                return cls(Fault.UNREACHABLE, error)
            if error.connection_invalidated:
                return cls(Fault.LOST if committing else Fault.ROLLED_BACK, error)
        raise translate(error) from error

    def retryable(self, idempotent: bool) -> bool:
        """Whether another attempt is safe: every fault but an unknown outcome of other work."""
        return idempotent or self.fault is not Fault.LOST

    def translated(self, server: str, attempts: int, idempotent: bool) -> StoreUnavailable:
        """The caller's error once no attempt is left."""
        reason = self.reason
        if self.fault is Fault.LOST and not idempotent:
            return OutcomeUnknown(
                f"lost the connection to {server} during a write that is not repeated "
                f"automatically; it may or may not have been applied: {reason}"
            )
        if self.fault is Fault.UNREACHABLE:
            return StoreUnavailable(f"{server} is unreachable after {attempts} attempts: {reason}")
        return StoreUnavailable(
            f"{server}: {self.fault.value} on each of {attempts} attempts: {reason}"
        )


def backoff(attempts: int) -> float:
    """Full jitter before attempt attempts + 1: 0 .. 2 ms * 2**(attempts - 1), at most WAIT_MAX."""
    return random.uniform(0.0, min(_WAIT_BASE * 2 ** (attempts - 1), WAIT_MAX))


def translate(error: SQLAlchemyError) -> Exception:
    """The domain error for a driver error; the rest of the store's errors are unavailable.

    Bad values are InvalidArgument, configuration faults (a missing schema, no database
    selected) ConfigError, statements too large WriteRefused.
    """
    fix = config_fault(error)
    if fix is not None:
        return ConfigError(f"{describe(error)}: {fix}")
    if isinstance(error, DataError):
        return InvalidArgument(f"the database refused a value: {describe(error)}")
    if _too_large(error):
        return WriteRefused(f"the statement is too large for the database: {describe(error)}")
    return StoreUnavailable(f"database error: {describe(error)}")


def mysql_code(error: BaseException) -> object:
    """MariaDB's error number of a driver error, else None."""
    original = getattr(error, "orig", None)
    return original.args[0] if original is not None and original.args else None


def _contention(error: DBAPIError) -> bool:
    original = error.orig
    if getattr(original, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    code = original.args[0] if original is not None and original.args else None
    if code in _RETRY_MYSQL_CODES:
        return True
    return "database is locked" in str(original)


def config_fault(error: SQLAlchemyError) -> str | None:
    """The fix for an error that a wrong store.url or server setup causes, else None."""
    original = getattr(error, "orig", None)
    if original is None:
        return None
    fix = _CONFIG_SQLSTATES.get(getattr(original, "sqlstate", None) or "")
    code = original.args[0] if original.args else None
    fix = fix or (_CONFIG_MYSQL_CODES.get(code) if isinstance(code, int) else None)
    if fix is None and type(original).__module__.startswith("psycopg"):
        text = str(original)
        fix = next((fix for sign, fix in _CONFIG_POSTGRES_SIGNS if sign.search(text)), None)
    return fix


def _too_large(error: SQLAlchemyError) -> bool:
    """A statement over the engine's size limits: sending it again fails the same way."""
    original = getattr(error, "orig", None)
    code = original.args[0] if original is not None and original.args else None
    text = str(original if original is not None else error)
    return code in _TOO_LARGE_MYSQL_CODES or any(sign in text for sign in _TOO_LARGE_SIGNS)


def describe(error: SQLAlchemyError) -> str:
    """The driver's message of error on one line, at most 300 characters, for messages."""
    original = getattr(error, "orig", None)
    return " ".join(str(original if original is not None else error).split())[:300]
