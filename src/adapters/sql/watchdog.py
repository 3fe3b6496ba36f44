"""A client-side read timeout for drivers that have none (psycopg/libpq).

libpq waits for a reply as long as the socket stays open: ``statement_timeout`` is enforced
by the server (no help when the server, or the network to it, stops answering), and TCP
keepalives or ``TCP_USER_TIMEOUT`` do not fire while the peer's kernel still acknowledges.
So every statement arms a deadline; if its reply has not arrived by then, the watchdog shuts
the connection's socket down. The driver then sees the connection closed and raises, the pool
discards the connection, and the engine's retry policy treats it as a lost connection.

The asyncio drivers of ``imbucket.aio`` (psycopg's asyncio mode, aiomysql) have no read
timeout either; the same watchdog ends their socket, whose reader on the event loop then
sees it closed.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from typing import Any

from sqlalchemy import Engine, event


class Watchdog:
    """Ends the socket of any statement of engine still unanswered after seconds."""

    def __init__(self, engine: Engine, seconds: float) -> None:
        self.seconds = seconds
        self.fired = 0  # sockets shut down so far
        self._armed: dict[int, tuple[float, Any, int]] = {}  # connection -> deadline, it, thread
        self._timed_out: set[int] = set()  # threads whose statement was ended
        self._changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        event.listen(engine, "before_cursor_execute", self._arm)
        event.listen(engine, "after_cursor_execute", self._disarm)
        event.listen(engine, "handle_error", self._failed)

    def timed_out(self) -> bool:
        """Whether a statement of this thread was ended since the last call (and forget it)."""
        me = threading.get_ident()
        with self._changed:
            ended = me in self._timed_out
            self._timed_out.discard(me)
            return ended

    def close(self) -> None:
        """Stop the watchdog thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(5)

    def _arm(self, connection: Any, *_: Any) -> None:
        dbapi = connection.connection.driver_connection
        deadline = time.monotonic() + self.seconds
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, daemon=True, name="sql-watchdog"
                )
                self._thread.start()
            # Never woken here: a wake-up per statement would cost every caller a thread
            # switch. Deadlines only grow, and an idle watchdog looks again within half of
            # seconds, before any deadline armed meanwhile is due.
            self._armed[id(dbapi)] = (deadline, dbapi, threading.get_ident())

    def _disarm(self, connection: Any, *_: Any) -> None:
        dbapi = connection.connection.driver_connection
        with self._changed:
            self._armed.pop(id(dbapi), None)

    def _failed(self, context: Any) -> None:
        dbapi = getattr(context.connection, "connection", None)
        dbapi = getattr(dbapi, "driver_connection", None)
        with self._changed:
            self._armed.pop(id(dbapi), None)

    def _watch(self) -> None:
        with self._changed:
            while not self._closed:
                if not self._armed:
                    self._changed.wait(self.seconds / 2)
                    continue
                key, (deadline, dbapi, thread) = min(self._armed.items(), key=lambda i: i[1][0])
                left = deadline - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                del self._armed[key]
                self._timed_out.add(thread)
                self.fired += 1
                _shut_down(dbapi)


def _shut_down(driver: Any) -> None:
    """Shut down the driver's socket under it; its blocked read returns at once."""
    with contextlib.suppress(Exception), socket.socket(fileno=os.dup(_fileno(driver))) as sock:
        sock.shutdown(socket.SHUT_RDWR)


def _fileno(driver: Any) -> int:
    """The socket of a psycopg connection (either mode) or of an aiomysql one."""
    pgconn = getattr(driver, "pgconn", None)
    if pgconn is not None:
        return int(pgconn.socket)
    return int(driver._writer.get_extra_info("socket").fileno())
