"""The campaign store's tables, and how to recognise a store without opening it for writing."""
from __future__ import annotations

import sqlite3
from pathlib import Path

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
SQLITE_MAGIC = b"SQLite format 3\x00"


def is_campaign_store(path: Path) -> bool:
    """An SQLite file holding the campaign tables (looked at read-only)."""
    if not path.is_file():
        return False
    with open(path, "rb") as fh:
        if fh.read(16) != SQLITE_MAGIC:
            return False
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return False
    return TABLES <= names
