"""Rescans of the run index in a child process at a lower priority: a rescan of 10,000 run folders
is seconds of Python work, and in the server's own process it would hold the interpreter lock
while clients wait. The child writes the index through its own SQLite connection (WAL) and
answers what it found; the server only learns whether anything changed."""
from __future__ import annotations

import multiprocessing
import os
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tracer.serve.index import ScanResult

NICE = 10


class ScanWorker:
    """One long-lived child (started on the first rescan, started again if it died)."""

    def __init__(self, db_path: Path, roots: tuple[Path, ...]) -> None:
        self.db_path, self.roots = db_path, roots
        self.proc: Any = None
        self.conn: Connection | None = None

    def scan(self) -> ScanResult:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        assert self.conn is not None
        self.conn.send("scan")
        result: ScanResult = self.conn.recv()  # EOFError when the child died: the caller reports it
        return result

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # the server has threads: no fork
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve_scans, args=(child, str(self.db_path), [str(r) for r in self.roots]),
                                name="tracer-serve-scan", daemon=True)
        self.proc.start()
        child.close()

    def close(self) -> None:
        if self.proc is None:
            return
        self.proc.kill()  # a rescan only reads run folders and commits whole batches: safe to stop anywhere
        self.proc.join(timeout=10)
        if self.conn is not None:
            self.conn.close()


def serve_scans(conn: Connection, db_path: str, roots: list[str]) -> None:
    """The child: one rescan per request until the pipe closes."""
    from tracer.serve.db import Db
    from tracer.serve.index import RunIndex

    os.nice(NICE)
    db = Db(Path(db_path))
    index = RunIndex(db, [Path(r) for r in roots])
    try:
        while True:
            try:
                conn.recv()
            except EOFError:
                return
            conn.send(index.scan())
    finally:
        db.close()
