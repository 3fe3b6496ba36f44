"""Run a mongoeco wire server (a MongoDB stand-in) on loopback until stdin closes.

Run by the Python >= 3.13 interpreter of the venv tests/mongo_emulator.py builds
(.venv-mongoeco); neither the project nor its tests import this file or mongoeco. It prints
one line, ``listening <host> <port>``, once clients can connect, then serves until SIGTERM or
SIGINT, or with --stop-on-eof until its standard input reaches end of file (how the test
session stops it: also when pytest dies).

    .venv-mongoeco/bin/python tools/mongoeco_server.py [--host 127.0.0.1] [--port 27017]

Port 0 lets the system pick a free port; the printed line says which.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading

from mongoeco.wire import AsyncMongoEcoProxyServer


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Block on stdin in a daemon thread; its end of file stops the server."""
    sys.stdin.buffer.read()
    loop.call_soon_threadsafe(stop.set)


async def serve(host: str, port: int, stop_on_eof: bool) -> None:
    """Serve until a stop signal arrives (or stdin closes, with stop_on_eof)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, stop.set)
    async with AsyncMongoEcoProxyServer(host=host, port=port) as server:
        address = server.address
        print(f"listening {address.host} {address.port}", flush=True)
        if stop_on_eof:
            threading.Thread(target=_watch_stdin, args=(loop, stop), daemon=True).start()
        await stop.wait()


def main() -> None:
    """Parse the address and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=27017)
    parser.add_argument("--stop-on-eof", action="store_true", help="stop when stdin closes")
    arguments = parser.parse_args()
    asyncio.run(serve(arguments.host, arguments.port, arguments.stop_on_eof))


if __name__ == "__main__":
    main()
