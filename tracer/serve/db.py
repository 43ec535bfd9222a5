"""The server's state, one SQLite file (WAL): the run index and the jobs. One connection shared by
the server's threads behind a lock; every change is one transaction, so a server killed at any
point leaves the last committed state."""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracer.errors import OutputError, TraceFormatError
from tracer.store.sqlite_open import Mode, open_sqlite

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, created REAL NOT NULL,
  command TEXT NOT NULL, device TEXT NOT NULL, status TEXT NOT NULL, counts TEXT NOT NULL, tags TEXT NOT NULL,
  error TEXT NOT NULL, sig TEXT NOT NULL, seen INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created);
CREATE INDEX IF NOT EXISTS runs_kind ON runs(kind, created);
CREATE INDEX IF NOT EXISTS runs_status ON runs(status, created);
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, state TEXT NOT NULL, request TEXT NOT NULL,
  argv TEXT NOT NULL, needs_gpu INTEGER NOT NULL, gpu INTEGER, pid INTEGER, pid_ticks INTEGER, exit INTEGER,
  started REAL, ended REAL, log TEXT NOT NULL, output TEXT, note TEXT NOT NULL DEFAULT '');
"""
ADDED = {"jobs": (("concurrency", "INTEGER NOT NULL DEFAULT 1"), ("executor", "TEXT NOT NULL DEFAULT 'local'"),
                  ("slurm_id", "TEXT"))}  # columns newer than schema 1: added to an older state file


class NotFound(Exception):
    """No run, job or file of that id or name (HTTP 404)."""


class Db:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = open_sqlite(path, Mode.CREATE, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(SCHEMA)
            self._add_columns()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(f"{path}: not a tracer serve state file ({exc}); move it away and it is rebuilt") from exc
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc}") from exc
        with self.tx() as con:
            row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise TraceFormatError(f"{path}: state schema {row[0]}, this tracer writes {SCHEMA_VERSION}")

    def _add_columns(self) -> None:
        for table, columns in ADDED.items():
            have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in have:
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def close(self) -> None:
        with self.lock:
            self.conn.close()
