"""A TCP proxy in front of the shared Redis that a test can cut, stall and restore.

Lets a test take "Redis" away mid-test without touching the server other runs share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class RedisProxy:
    """Forwards 127.0.0.1:<port> to the Redis of target_url while ``mode == "up"``.

    ``cut()`` drops every connection and refuses new ones (connection closed at once);
    ``stall()`` drops them and then accepts but never answers (the client times out).
    """

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.port = self._server.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.port}"))
        self.mode = "up"
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Refuse service: close every connection now and every new one on arrival."""
        self._switch("down")

    def stall(self) -> None:
        """Hang: close every connection now; accept new ones but never answer."""
        self._switch("stall")

    def restore(self) -> None:
        """Forward again."""
        self._switch("up")

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
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
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
