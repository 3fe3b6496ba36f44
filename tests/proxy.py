"""A TCP proxy in front of a shared server that a test can cut, stall and restore.

Lets a test take "Redis" or "PostgreSQL" away mid-test, or lose one reply, without touching
the server other runs share. Loopback only.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    """Forwards 127.0.0.1:<port> to the server of target_url while ``mode == "up"``.

    ``url`` is target_url pointing at the proxy. ``cut()`` drops every connection and
    refuses new ones (connection closed at once); ``stall()`` drops them and then accepts but
    never answers (the client times out); ``black_hole()`` keeps every connection open and
    swallows all data, new connections too; ``lose_next_reply()`` lets the next request reach
    the server and drops the connection when the server's reply arrives, unread by the client.
    """

    def __init__(self, target_url: str, default_port: int = 6379) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or default_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.port = self._server.getsockname()[1]
        user = parts.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{self.port}" if user else f"127.0.0.1:{self.port}"
        self.url = urlunsplit(parts._replace(netloc=netloc))
        self.mode = "up"
        self.replies_lost = 0
        self._lose_reply = False
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ended: set[int] = set()  # client ports whose connection is gone
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Refuse service: close every connection now and every new one on arrival."""
        self._switch("down")

    def stall(self) -> None:
        """Hang: close every connection now; accept new ones but never answer."""
        self._switch("stall")

    def black_hole(self) -> None:
        """Keep every connection open but forward nothing more, either way; new connections
        are accepted and never answered. A server that stopped answering, as the client sees it.
        """
        with self._lock:
            self.mode = "black-hole"

    def restore(self) -> None:
        """Forward again."""
        self._switch("up")

    def lose_next_reply(self) -> None:
        """Drop the connection that next receives data from the server, instead of relaying it.

        The server has then handled the request (for an autocommitted statement or a COMMIT:
        committed it), and the client sees the connection closed: the outcome is unknown to it.
        """
        with self._lock:
            self._lose_reply = True

    def wait_ended(self, client_port: int, timeout: float = 10) -> None:
        """Wait until the connection from client_port (the client's own port) is gone."""
        with self._changed:
            ended = self._changed.wait_for(lambda: client_port in self._ended, timeout)
        assert ended, f"the connection from port {client_port} is still open"

    def close(self) -> None:
        """Stop the proxy."""
        self._closed = True
        self._switch("down")
        self._thread.join(5)
        self._server.close()

    def _switch(self, mode: str) -> None:
        with self._lock:
            self.mode = mode
            dropped, self._open = self._open, []
        for sock in dropped:
            _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._lock:
                mode = self.mode
                if mode != "down":
                    self._open.append(client)
            if mode == "down":
                _close(client)
            elif mode == "up":
                self._forward(client)

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target, timeout=5)
        except OSError:
            _close(client)
            return
        upstream.settimeout(None)
        with self._lock:
            self._open.append(upstream)
        threading.Thread(target=_pump, args=(client, upstream, self._dropping), daemon=True).start()
        port = client.getpeername()[1]
        threading.Thread(target=self._reply, args=(upstream, client, port), daemon=True).start()

    def _reply(self, upstream: socket.socket, client: socket.socket, port: int) -> None:
        _pump(upstream, client, self._dropping, self._losing)
        with self._changed:
            self._ended.add(port)
            self._changed.notify_all()

    def _dropping(self) -> bool:
        """Whether data is swallowed instead of forwarded (black hole)."""
        return self.mode == "black-hole"

    def _losing(self) -> bool:
        """Whether the reply just received is to be lost (only the first one after arming)."""
        with self._lock:
            lose, self._lose_reply = self._lose_reply, False
            self.replies_lost += lose
        return lose


def _pump(
    source: socket.socket,
    sink: socket.socket,
    drop: Callable[[], bool],
    lose: Callable[[], bool] = lambda: False,
) -> None:
    try:
        while data := source.recv(65536):
            if drop():
                continue
            if lose():
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
