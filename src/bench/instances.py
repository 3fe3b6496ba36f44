"""Private server instances the bench starts and stops: PostgreSQL and MariaDB, buffer-bounded.

A memory-budget run needs a server whose buffer is the budget and whose counters nobody else
moves, so the bench starts its own: PostgreSQL from ``initdb`` (``shared_buffers`` at the
budget), MariaDB from ``mariadb-install-db`` (``innodb_buffer_pool_size`` at the budget), each
with its data directory in a temporary directory, on a free loopback port, run as the
``postgres`` / ``mysql`` user when the bench runs as root. Every wait is bounded; ``stop``
kills what is left and removes the directory. The system's own servers and data are never
touched: the MariaDB defaults file comes first on the command line, so /etc/mysql stays out.

``restart`` empties the engine's buffer; ``drop_os_cache`` asks the kernel to forget the
cached pages of the instance's files (after ``flush`` wrote the dirty ones), so that the next
buffer misses are read from the disk rather than from the OS page cache.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imbucket.domain.errors import ConfigError

PG_BIN = Path("/usr/lib/postgresql/15/bin")
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
START_SECONDS = 60.0
STOP_SECONDS = 30.0
DRIVERS = {"postgresql": "psycopg", "mariadb": "pymysql"}  # what execute() connects with
PG_FLOOR = 128 * 1024  # shared_buffers' minimum (16 pages of 8 KiB)
INNODB_FLOOR = (
    6 * 1024 * 1024
)  # innodb_buffer_pool_size's minimum with 16 KiB pages (MariaDB 10.11)


def stop_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that a terminated bench still stops its instances."""

    def leave(_signal: int, _frame: object) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, leave)


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port: int = listener.getsockname()[1]
    return port


def drop_os_cache(directory: Path) -> int:
    """Ask the kernel to drop the cached pages of every file under directory; returns files.

    ``posix_fadvise(POSIX_FADV_DONTNEED)`` drops clean pages only and is advice: pages
    another process maps or keeps dirty stay. Callers flush the engine first.
    """
    dropped = 0
    for path in directory.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # a socket, or a file removed meanwhile
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += 1
        finally:
            os.close(fd)
    return dropped


@dataclass
class Instance:
    """A private server: its URL (database ``imbucket`` or ``postgres``), directory, process."""

    engine: str  # "postgresql" or "mariadb"
    buffer_bytes: int  # the engine's buffer as configured (the budget, raised to its floor)
    directory: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    _user: str = field(default="", repr=False)

    @property
    def url(self) -> str:
        """The URL the stores open (PostgreSQL's ``postgres`` database, MariaDB's ``imbucket``)."""
        if self.engine == "postgresql":
            return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/imbucket"

    @property
    def data(self) -> Path:
        """The data directory."""
        return self.directory / "data"

    def start(self) -> None:
        """Start the server on its data directory and wait (bounded) until it answers."""
        self.process = subprocess.Popen(
            self._command(),
            stdout=subprocess.DEVNULL,
            stderr=open(self.directory / "server.log", "ab"),  # noqa: SIM115 (the child owns it)
            **_as_user(self._user),
        )
        _wait(self._answers, f"{self.engine} on port {self.port}", self)

    def stop(self) -> None:
        """Stop the server (clean shutdown, killed past STOP_SECONDS); idempotent."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_SECONDS)

    def restart(self) -> None:
        """Stop and start again: the engine's buffer is empty afterwards."""
        self.stop()
        self.start()

    def resize(self, buffer_bytes: int) -> int:
        """Restart with the buffer at buffer_bytes (raised to the engine's floor); returns it."""
        self.buffer_bytes = _buffer(self.engine, buffer_bytes)
        if self.engine == "mariadb":
            (self.directory / "my.cnf").write_text(_my_cnf(self))
        self.restart()
        return self.buffer_bytes

    def flush(self) -> None:
        """Write every dirty page to the files, so that dropping the OS cache drops them."""
        if self.engine == "postgresql":
            self.execute("CHECKPOINT")
            return
        self.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")
        _wait(lambda: self._dirty() == 0, "InnoDB dirty pages flushed", self)
        self.execute("SET GLOBAL innodb_max_dirty_pages_pct = 90")

    def cold(self) -> int:
        """Flush, restart (empty buffer), drop the OS page cache of the files; returns files."""
        self.flush()
        self.stop()  # a clean shutdown writes what is left; dropping after it keeps nothing
        dropped = drop_os_cache(self.directory)
        self.start()
        return dropped

    def execute(self, statement: str) -> list[tuple[Any, ...]]:
        """Run one statement as the superuser and return its rows."""
        if self.engine == "postgresql":
            import psycopg

            with psycopg.connect(
                host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                autocommit=True, connect_timeout=5,
            ) as connection:  # fmt: skip
                cursor = connection.execute(statement)
                return list(cursor.fetchall()) if cursor.description else []
        import pymysql

        connection = pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", connect_timeout=5, autocommit=True
        )
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
                return list(cursor.fetchall())
        finally:
            connection.close()

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _dirty(self) -> int:
        rows = self.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
        return int(rows[0][1]) if rows else 0

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.engine} exited: {_log_tail(self)}")
        try:
            self.execute("SELECT 1")
        except Exception:  # not up yet: any driver error means try again
            return False
        return True

    def _command(self) -> list[str]:
        if self.engine == "postgresql":
            return [
                str(PG_BIN / "postgres"),
                "-D", str(self.data),
                "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1",
                "-c", f"unix_socket_directories={self.directory}",
                "-c", f"shared_buffers={self.buffer_bytes // 1024}kB",
                "-c", "fsync=off",
                "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off",
                "-c", "max_wal_size=1GB",
            ]  # fmt: skip
        # The defaults file first: mariadbd reads no other option file then.
        return [MARIADBD, f"--defaults-file={self.directory / 'my.cnf'}"]


def start(engine: str, buffer_bytes: int) -> Instance:
    """A started private instance of engine ("postgresql" or "mariadb"); ConfigError if absent.

    buffer_bytes is raised to the engine's floor; the instance's ``buffer_bytes`` says what ran.
    ModuleNotFoundError, before anything starts, when the engine's driver (an extra) is not
    installed: the readiness check would otherwise take it for a server not answering yet.
    """
    importlib.import_module(DRIVERS[engine])
    directory = Path(tempfile.mkdtemp(prefix=f"imbucket-{engine}-"))
    directory.chmod(0o755)
    size = _buffer(engine, buffer_bytes)
    user = ("postgres" if engine == "postgresql" else "mysql") if os.geteuid() == 0 else ""
    instance = Instance(engine, size, directory, free_port(), _user=user)
    try:
        _initialise(instance)
        instance.start()
        if engine == "mariadb":
            instance.execute("CREATE DATABASE IF NOT EXISTS imbucket")
    except BaseException:
        instance.close()
        raise
    return instance


def _buffer(engine: str, wanted: int) -> int:
    """Wanted rounded up to the engine's unit (a page; InnoDB's 1 MiB chunk), at its floor."""
    floor = PG_FLOOR if engine == "postgresql" else INNODB_FLOOR
    chunk = 8192 if engine == "postgresql" else 1024 * 1024
    return max(floor, -(-wanted // chunk) * chunk)


def _initialise(instance: Instance) -> None:
    if instance.engine == "postgresql":
        if not (PG_BIN / "initdb").exists():
            raise ConfigError(f"a private PostgreSQL needs {PG_BIN / 'initdb'}")
        _chown(instance.directory, instance._user)
        command = [str(PG_BIN / "initdb"), "-D", str(instance.data), "-U", "postgres"]
        command += ["--auth=trust", "--encoding=UTF8", "--no-sync"]
        _run(command, instance._user)
        return
    if shutil.which("mariadb-install-db") is None or not Path(MARIADBD).exists():
        raise ConfigError("a private MariaDB needs mariadb-install-db and mariadbd")
    instance.data.mkdir()
    (instance.directory / "my.cnf").write_text(_my_cnf(instance))
    _chown(instance.directory, instance._user)
    command = ["mariadb-install-db", f"--defaults-file={instance.directory / 'my.cnf'}"]
    command += ["--auth-root-authentication-method=normal", "--skip-test-db"]
    _run(command + (["--user", instance._user] if instance._user else []), "")


def _my_cnf(instance: Instance) -> str:
    d = instance.directory
    return f"""[mysqld]
datadir={instance.data}
socket={d / "mysqld.sock"}
pid-file={d / "mysqld.pid"}
log-error={d / "server.log"}
tmpdir={d}
port={instance.port}
bind-address=127.0.0.1
skip-name-resolve
skip-log-bin
performance_schema=OFF
innodb_buffer_pool_size={instance.buffer_bytes}
innodb_buffer_pool_load_at_startup=OFF
innodb_stats_auto_recalc=OFF
innodb_buffer_pool_dump_at_shutdown=OFF
innodb_log_file_size=64M
innodb_flush_log_at_trx_commit=2
max_connections=200
"""


def _run(command: list[str], user: str) -> None:
    found = subprocess.run(
        command, capture_output=True, text=True, timeout=START_SECONDS, check=False,
        **_as_user(user),
    )  # fmt: skip
    if found.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {(found.stderr or found.stdout)[-1500:]}")


def _as_user(user: str) -> dict[str, Any]:
    return {"user": user, "group": user} if user else {}


def _chown(path: Path, user: str) -> None:
    if not user:
        return
    for item in [path, *path.rglob("*")]:
        shutil.chown(item, user, user)


def _log_tail(instance: Instance) -> str:
    log = instance.directory / "server.log"
    return log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"


def _wait(ready: Callable[[], bool], what: str, instance: Instance) -> None:
    started = time.monotonic()
    while time.monotonic() - started < START_SECONDS:
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready within {START_SECONDS} s: {_log_tail(instance)}")
