"""The campaign store's tables, and how to recognise a store without opening it for writing."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from tracer.store.inputs import read_head
from tracer.store.sqlite_open import SQLITE_MAGIC, open_sqlite

SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS cells (id INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, label TEXT, workload TEXT,
  variant TEXT, config TEXT, shape TEXT, dtype TEXT, trials_target INTEGER);
CREATE TABLE IF NOT EXISTS trials (cell_id INTEGER NOT NULL, trial INTEGER NOT NULL, failed INTEGER NOT NULL,
  crashed INTEGER NOT NULL DEFAULT 0, first_failure TEXT, failed_checks TEXT, gpu TEXT, worker TEXT, seconds REAL,
  finished REAL, PRIMARY KEY (cell_id, trial));
CREATE TABLE IF NOT EXISTS crashes (id INTEGER PRIMARY KEY, cell_id INTEGER, trials TEXT, worker TEXT, gpu TEXT,
  exit_code INTEGER, detail TEXT, at REAL);
CREATE TABLE IF NOT EXISTS inflight (worker TEXT PRIMARY KEY, cell_id INTEGER, trials TEXT, gpu TEXT, started REAL);
"""
TABLES = frozenset({"campaign", "cells", "trials", "crashes", "inflight"})


def table_names(path: Path) -> set[str]:
    """The tables of an SQLite file, looked at read-only (empty for a file that is not SQLite).
    sqlite3.OperationalError escapes: SQLite could not read a database (I/O, a WAL file's -shm)."""
    if read_head(path, 16, "a campaign store") != SQLITE_MAGIC:
        return set()
    con = open_sqlite(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError:
        return set()
    finally:
        con.close()


def is_campaign_store(path: Path) -> bool:
    """An SQLite file holding the campaign tables (looked at read-only)."""
    if not path.is_file():
        return False
    try:
        return TABLES <= table_names(path)
    except sqlite3.DatabaseError:
        return False
