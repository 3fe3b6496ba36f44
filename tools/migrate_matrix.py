"""Migrate the demo data and the bench small dataset between every pair of backends here.

    .venv/bin/python tools/migrate_matrix.py [--data demo,small] [--minutes 60]
        [--postgres URL] [--mariadb URL] [--mongo URL | --mongoeco PYTHON] [--rows NAMES]
        [--out FILE.md]

For every ordered pair of the persistent rows (sql-row and sql-bucket on SQLite and on each
SQL server given, mongo-row and mongo-bucket on the MongoDB given), it runs ``imbucket
migrate`` (``app.migrate.migrate``) then ``verify`` from a scratch namespace holding the data
into a fresh scratch namespace, and prints one line per pair; each namespace is dropped
afterwards. Server URLs default to the IMBUCKET_TEST_* variables the test suite reads.
``--mongoeco PYTHON`` starts a mongoeco wire server with that interpreter (the venv ``make
mongoeco`` builds) and stops it at the end. Pairs not started within ``--minutes`` are listed
as not run, with an estimate. ``make migrate-matrix`` runs it; docs/migrate.md records a run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from imbucket.bench.migrate_matrix import Matrix, Pair, rows, table  # noqa: E402


@contextmanager
def mongoeco(python: str) -> Iterator[str]:
    """A mongoeco wire server on a free port; its URL. Stopped (stdin closed) on exit."""
    launcher = ROOT / "tools" / "mongoeco_server.py"
    command = [python, str(launcher), "--port", "0", "--stop-on-eof"]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline().split()  # "listening <host> <port>"
        if len(line) != 3 or line[0] != "listening":
            raise SystemExit(f"mongoeco did not start: {line}")
        yield f"mongodb://{line[1]}:{line[2]}/imbucket"
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> None:
    """Parse the options, run the matrix, print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="demo,small", help="datasets, comma-separated")
    parser.add_argument("--minutes", type=float, default=60.0, help="time budget")
    parser.add_argument("--postgres", default=os.environ.get("IMBUCKET_TEST_POSTGRES_URL", ""))
    parser.add_argument("--mariadb", default=os.environ.get("IMBUCKET_TEST_MARIADB_URL", ""))
    parser.add_argument("--mongo", default=os.environ.get("IMBUCKET_TEST_MONGO_URL", ""))
    parser.add_argument("--mongoeco", default="", help="interpreter to start mongoeco with")
    parser.add_argument("--rows", default="", help="only these rows, e.g. 'sql-row SQLite,…'")
    parser.add_argument("--out", default="", help="also write the Markdown table here")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="imbucket-matrix-") as workdir:
        if options.mongoeco and not options.mongo:
            with mongoeco(options.mongoeco) as url:
                pairs = _run(options, url, Path(workdir))
        else:
            pairs = _run(options, options.mongo, Path(workdir))
    text = table(pairs)
    print(text, flush=True)
    if options.out:
        Path(options.out).write_text(text + "\n")


def _run(options: argparse.Namespace, mongo: str, workdir: Path) -> list[Pair]:
    matrix_rows = rows(options.postgres, options.mariadb, mongo, options.rows)
    print(f"rows: {', '.join(row.name for row in matrix_rows)}", flush=True)
    started = time.monotonic()

    def report(pair: Pair) -> None:
        print(f"[{time.monotonic() - started:7.0f} s] {pair.line()}", flush=True)

    matrix = Matrix(matrix_rows, workdir, options.minutes * 60, report)
    return matrix.run([name for name in options.data.split(",") if name])


if __name__ == "__main__":
    main()
