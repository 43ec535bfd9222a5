"""Finds what a path holds (trace run, sanitizer run, campaign store, ablation JSON) and loads it
for plots and reports."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tracer.campaign.stats import CellStats, cell_stats
from tracer.errors import TraceFormatError, UsageError


def sanitizer_runs(path: Path) -> list[dict]:
    report = path / "report.json" if path.is_dir() else path
    if not report.is_file():
        raise TraceFormatError(f"{path}: no sanitizer report.json (expected a `tracer sanitize` output directory)")
    try:
        data = json.loads(report.read_text())
        return list(data["runs"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise TraceFormatError(f"{report}: not a tracer sanitize report ({exc})") from exc


def is_campaign_store(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            return False
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE name='trials'").fetchone() is not None
    finally:
        con.close()


def ablation_cells(path: Path) -> list[CellStats]:
    """From a campaign store, or a JSON {"variants": {name: {"trials": N, "failures": K}}}."""
    if is_campaign_store(path):
        from tracer.campaign.store import Store

        return [c.stats for c in Store.open(path, readonly=True).summary()]
    try:
        data = json.loads(path.read_text())
        variants = data["variants"]
        return [cell_stats(name, int(v["failures"]), int(v["trials"])) for name, v in variants.items()]
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: not a campaign store or a JSON of variant -> trials/failures ({exc})") from exc
