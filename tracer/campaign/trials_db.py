"""The campaign store: one SQLite file (WAL) with the campaign, its cells, every trial, crashes
and what is in flight. A batch of trials is committed in one transaction, so a kill at any moment
leaves either the whole batch or none of it."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tracer.campaign.grid import CampaignSpec, Cell
from tracer.campaign.stats import CellStats, cell_stats
from tracer.campaign.schema import SCHEMA, TABLES, table_names
from tracer.errors import OutputError, TraceFormatError, UsageError
from tracer.store.inputs import RUN_FILE_LIMIT, check_file, parse_json, size_words
from tracer.store.lock import RunLock, run_lock
from tracer.store.sqlite_open import Mode, open_sqlite, open_problem

BAD_FLAG = ("(typeof(failed) != 'integer' OR failed NOT IN (0, 1) OR typeof(crashed) != 'integer' "
            "OR crashed NOT IN (0, 1))")
READ_WAIT_S = 2.0  # status and report wait this long for a writer's lock (WAL readers rarely wait at all)


@dataclass(frozen=True, kw_only=True)
class TrialRow:
    cell_id: int
    trial: int
    failed: bool
    crashed: bool
    first_failure: str | None
    failed_checks: str
    gpu: str
    worker: str
    seconds: float


class StoredCell(NamedTuple):
    cell_id: int
    cell: Cell
    target: int  # trials wanted


class Inflight(NamedTuple):
    cell_id: int
    trials: list[int]
    gpu: str


@dataclass(frozen=True, kw_only=True)
class CellSummary:
    cell_id: int
    label: str
    key: str
    target: int
    done: int
    failures: int
    crashed: int
    stats: CellStats | None  # None: no trials yet (an interval needs at least one)
    gpus: str


class Store:
    def __init__(self, path: Path, con: sqlite3.Connection) -> None:
        self.path, self.con = path, con
        self.lock: RunLock | None = None

    @classmethod
    def open(cls, path: Path, create: bool = False, readonly: bool = False, exclusive: bool = False) -> Store:
        """Open a campaign store. A file that is not one is refused untouched; `readonly` opens
        it for reading only (status, report); `exclusive` takes the store's run lock
        (tracer.store.lock) for as long as the Store lives, so two runs never run one trial twice."""
        if os.path.lexists(path):
            check_file(path, "a campaign store (an SQLite file)")
            require_campaign_file(path, allow_empty=create)
        elif not create:
            raise UsageError(f"{path}: no campaign store here (run `tracer campaign run PROFILE -o {path}` first)")
        if readonly:
            store = cls(path, _read_only(path))
            store.require_campaign()
            return store
        lock = run_lock(path) if exclusive else None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            con = open_sqlite(path, Mode.CREATE, timeout=60, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.executescript(SCHEMA)
        except (OSError, sqlite3.OperationalError) as exc:
            raise store_error(path, exc) from exc
        store = cls(path, con)
        store.lock = lock
        return store

    def close(self) -> None:
        self.con.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def init(self, spec: CampaignSpec, environment: dict[str, Any]) -> None:
        """Record the campaign and its cells; reopening with another campaign's profile is refused."""
        with self.tx():
            row = self.con.execute("SELECT value FROM campaign WHERE key='name'").fetchone()
            if row and row[0] != spec.name:
                raise UsageError(f"{self.path} holds campaign {row[0]!r}, not {spec.name!r}; use another -o")
            if not row:
                for k, v in (("name", spec.name), ("profile", json.dumps(spec.to_json())), ("created", str(time.time())),
                             ("environment", json.dumps(environment, default=str))):
                    self.con.execute("INSERT INTO campaign VALUES (?, ?)", (k, v))
            for c in spec.cells():
                self.con.execute("INSERT OR IGNORE INTO cells (key, label, workload, variant, config, shape, dtype, trials_target) "
                                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (c.key, c.label, c.workload, c.variant, c.config, c.shape,
                                                                    c.dtype, spec.trials_per_cell))
                self.con.execute("UPDATE cells SET trials_target = ? WHERE key = ?", (spec.trials_per_cell, c.key))

    def require_campaign(self) -> None:
        """A store read for status or a report names its campaign and holds its cells (`init` writes
        both in one transaction), and every trial belongs to one of them: a store that breaks any of
        these is damaged, never a campaign of no cells or of cells without trials."""
        try:
            names = self.con.execute("SELECT count(*) FROM campaign WHERE key = 'name' AND typeof(value) = 'text'").fetchone()[0]
            cells = self.con.execute("SELECT count(*) FROM cells").fetchone()[0]
            orphans = self.con.execute("SELECT count(*) FROM trials WHERE cell_id NOT IN (SELECT id FROM cells)").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(f"{self.path}: {open_problem(self.path, exc)}") from exc
        if names != 1 or cells == 0 or orphans:
            self.con.close()
            what = ("no campaign name" if names != 1 else "no cells" if cells == 0
                    else f"{orphans} trial(s) of no cell it names")
            raise TraceFormatError(f"{self.path}: the store holds {what}: damaged, or never initialised (a campaign run "
                                   "writes its name and cells before any trial)")

    def tx(self) -> _Tx:
        return _Tx(self.con, self.path)

    def meta(self, key: str) -> str | None:
        row = self.con.execute("SELECT value FROM campaign WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def meta_json(self, key: str) -> dict[str, Any]:
        """A JSON object stored under key ({} where absent): its size checked before it is read, its
        depth while it is decoded; anything else is one TraceFormatError naming the store."""
        row = self.con.execute("SELECT typeof(value), length(CAST(value AS BLOB)) FROM campaign WHERE key = ?", (key,)).fetchone()
        if row is None or row[0] == "null":
            return {}
        where = f"{self.path}: the campaign's {key}"
        if row[0] != "text" or row[1] > RUN_FILE_LIMIT:
            raise TraceFormatError(f"{where} is {row[0]} of {row[1]:,} bytes, not JSON text of at most {size_words(RUN_FILE_LIMIT)}")
        data = parse_json(self.meta(key) or "", where, "JSON")
        if not isinstance(data, dict):
            raise TraceFormatError(f"{where} must be a JSON object, not {type(data).__name__}")
        return data

    def cells(self) -> list[StoredCell]:
        rows = self.con.execute("SELECT id, key, label, workload, variant, config, shape, dtype, trials_target FROM cells ORDER BY id")
        return [StoredCell(r[0], Cell(key=r[1], label=r[2], workload=r[3], variant=r[4], config=r[5], shape=r[6], dtype=r[7]), r[8]) for r in rows]

    def trial_count(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM trials").fetchone()[0])

    def cell_counts(self, cell_id: int) -> tuple[int, int, int]:
        """(trials, failures, crashed) stored for a cell; flags other than 0 and 1 (text, -1, 7) are a
        damaged store, not a failure rate."""
        done, fails, crashed, bad, first = self.con.execute(
            f"SELECT count(*), COALESCE(sum(failed), 0), COALESCE(sum(crashed), 0), total({BAD_FLAG}), "
            f"min(CASE WHEN {BAD_FLAG} THEN trial END) FROM trials WHERE cell_id = ?", (cell_id,)).fetchone()
        if bad:
            raise TraceFormatError(f"{self.path}: trials of cell {cell_id}: {int(bad)} row(s) whose failed/crashed flag is "
                                   f"not 0 or 1 (first: trial {first}; damaged store)")
        return int(done), int(fails), int(crashed)

    def done_trials(self, cell_id: int) -> set[int]:
        return {r[0] for r in self.con.execute("SELECT trial FROM trials WHERE cell_id = ?", (cell_id,))}

    def add_trials(self, rows: list[TrialRow], worker: str | None = None) -> int:
        """Insert a batch in one transaction; an already stored trial is kept (merging is idempotent)."""
        with self.tx():
            before = self.con.total_changes
            self.con.executemany(
                "INSERT OR IGNORE INTO trials VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.cell_id, r.trial, int(r.failed), int(r.crashed), r.first_failure, r.failed_checks, r.gpu, r.worker,
                  r.seconds, time.time()) for r in rows])
            added = self.con.total_changes - before
            if worker is not None:
                self.con.execute("DELETE FROM inflight WHERE worker = ?", (worker,))
        return added

    def mark_inflight(self, worker: str, cell_id: int, trials: list[int], gpu: str) -> None:
        with self.tx():
            self.con.execute("INSERT OR REPLACE INTO inflight VALUES (?, ?, ?, ?, ?)",
                             (worker, cell_id, json.dumps(trials), gpu, time.time()))

    def take_inflight(self, worker: str) -> Inflight | None:
        with self.tx():
            row = self.con.execute("SELECT cell_id, trials, gpu FROM inflight WHERE worker = ?", (worker,)).fetchone()
            self.con.execute("DELETE FROM inflight WHERE worker = ?", (worker,))
        return Inflight(row[0], self._trials(row[1]), row[2]) if row else None

    def record_crash(self, cell_id: int, trials: list[int], worker: str, gpu: str, exit_code: int | None, detail: str) -> None:
        with self.tx():
            self.con.execute("INSERT INTO crashes (cell_id, trials, worker, gpu, exit_code, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (cell_id, json.dumps(trials), worker, gpu, exit_code, detail, time.time()))

    def crash_count(self, cell_id: int, trials: list[int]) -> int:
        rows = self.con.execute("SELECT trials FROM crashes WHERE cell_id = ?", (cell_id,)).fetchall()
        wanted = set(trials)
        return sum(1 for (t,) in rows if wanted & set(self._trials(t)))

    def _trials(self, text: object) -> list[int]:
        """A stored list of trial numbers (JSON text the store wrote); anything else is one error."""
        data = parse_json(text, f"{self.path}: a crash or in-flight record", "a list of trials") if isinstance(text, str) else None
        if not (isinstance(data, list) and all(type(t) is int for t in data)):
            raise TraceFormatError(f"{self.path}: a crash or in-flight record holds {str(text)[:40]!r}, not a list of trial numbers")
        return data

    def crashes(self) -> list[dict[str, Any]]:
        rows = self.con.execute("SELECT c.label, r.trials, r.worker, r.gpu, r.exit_code, r.detail FROM crashes r "
                                "JOIN cells c ON c.id = r.cell_id ORDER BY r.id").fetchall()
        return [{"cell": a, "trials": self._trials(b), "worker": w, "gpu": g, "exit_code": e, "detail": d} for a, b, w, g, e, d in rows]

    def summary(self) -> list[CellSummary]:
        out = []
        for cell_id, cell, target in self.cells():
            done, fails, crashed = self.cell_counts(cell_id)
            gpus = ",".join(sorted({g for (g,) in self.con.execute("SELECT DISTINCT gpu FROM trials WHERE cell_id = ?", (cell_id,))}))
            st = cell_stats(cell.label, fails, done) if done else None
            out.append(CellSummary(cell_id=cell_id, label=cell.label, key=cell.key, target=target, done=done, failures=fails, crashed=crashed,
                                   stats=st, gpus=gpus))
        return out

    def first_failures(self, cell_id: int, limit: int = 5) -> list[tuple[int, str, str]]:
        return list(self.con.execute("SELECT trial, first_failure, failed_checks FROM trials WHERE cell_id = ? AND failed = 1 "
                                     "ORDER BY trial LIMIT ?", (cell_id, limit)))


def require_campaign_file(path: Path, allow_empty: bool = False) -> None:
    """A file that is not a campaign store (a trace SQLite, anything else) is refused, read only."""
    if allow_empty and path.stat().st_size == 0:
        return
    try:
        tables = table_names(path)
    except sqlite3.OperationalError as exc:  # a lock, a hot journal, a WAL store's -shm in a read-only folder
        raise OutputError(f"cannot open the campaign store {path}: {open_problem(path, exc)}") from exc
    if not TABLES <= tables:
        raise TraceFormatError(f"{path}: not a campaign store (an SQLite file with the tables {', '.join(sorted(TABLES))}); "
                               "left as it was")


def _read_only(path: Path) -> sqlite3.Connection:
    """A reading connection that has read the schema: a lock, hot journal or WAL problem is said here."""
    con = open_sqlite(path, Mode.READ, timeout=READ_WAIT_S, isolation_level=None)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        con.close()
        raise TraceFormatError(f"{path}: {open_problem(path, exc)}") from exc
    return con


def store_error(path: Path, exc: Exception) -> OutputError:
    """A write the store could not make (disk full, I/O error, read-only): committed trials are intact."""
    return OutputError(f"cannot write the campaign store {path}: {exc} (trials already committed are intact)")


class _Tx:
    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con, self.path = con, path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise store_error(self.path, exc) from exc
        return self.con

    def __exit__(self, exc_type: object, exc: BaseException | None, _tb: object) -> None:
        try:
            self.con.execute("ROLLBACK" if exc_type else "COMMIT")
        except sqlite3.OperationalError as err:
            if exc_type is None:
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
                raise store_error(self.path, err) from err
        if isinstance(exc, sqlite3.OperationalError):
            raise store_error(self.path, exc) from exc
