"""Reads Nsight Systems SQLite exports (schema 3.x) and tracer's CUPTI captures, which share it.

Tables exist only when they have rows and columns drift between versions, so every table and
column is optional except the kernel table; strings live in StringIds. Columns come straight into
numpy (one pass over the rows, checked for their SQLite type in the same query); anything that is
not what the schema promises (a corrupt page, text or a real where an integer belongs, NULL starts,
strings stored as BLOBs) is one TraceFormatError naming the table and column.
"""
from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from tracer.errors import TraceFormatError
from tracer.trace.model import Apis, EventRecord, Kernels, Ranges, Sync, SyncKind, Trace

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RANGE_EVENT_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXt twins
SYNC_TYPE = {1: SyncKind.EVENT, 2: SyncKind.WAIT, 3: SyncKind.STREAM, 4: SyncKind.CONTEXT}
TIME_LIMIT = 1 << 62  # times at or beyond this overflow the differences analysis takes
RECORD_ERRORS = "TRACER_RECORD_ERRORS_"


@dataclass(frozen=True)
class Col:
    """An integer column: `default` stands in where the column is absent or NULL; required columns
    (default None) must be present and never NULL."""

    name: str
    default: int | None = -1


def type_check(cols: Sequence[Col], have: set[str], prefix: str = "") -> str:
    """SQL that is true when every present column holds an integer (or NULL where it may)."""
    checks = [f"typeof({prefix}{c.name}) = 'integer'" if c.default is None else f"typeof({prefix}{c.name}) IN ('integer', 'null')"
              for c in cols if c.name in have]
    return f"({' AND '.join(checks)})" if checks else "1"


def classify_api(name: str) -> SyncKind | None:
    """Sync kind from the API name (cudaStreamSynchronize_v3020, cuCtxSynchronize, ...)."""
    base = name.split("_v")[0].lower()
    if "streamwaitevent" in base:
        return SyncKind.WAIT
    if "streamsynchronize" in base:
        return SyncKind.STREAM
    if "eventsynchronize" in base:
        return SyncKind.EVENT
    if "devicesynchronize" in base or "ctxsynchronize" in base:
        return SyncKind.CONTEXT
    return None


def connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    with open(path, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise TraceFormatError(f"{path}: not an SQLite file (expected an nsys .sqlite export or a tracer capture)")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{path}: corrupt SQLite file ({exc})") from exc
    return con


class SqliteTables:
    """One open export: typed column reads and the StringIds table as positions in `strings`."""

    def __init__(self, con: sqlite3.Connection, path: Path) -> None:
        self.con, self.path = con, path
        with self.reading("sqlite_master"):
            self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.strings: list[str] = []
        self._ids = np.zeros(0, dtype=np.int64)  # StringIds ids, sorted
        self._pos = np.zeros(0, dtype=np.int64)  # their positions in strings
        self._lookup: dict[str, int] = {}
        self._unknown = -1

    @contextmanager
    def reading(self, where: str) -> Iterator[None]:
        """Whatever a corrupt file makes sqlite3 or the conversion raise becomes one line naming it."""
        try:
            yield
        except TraceFormatError:
            raise
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(f"{self.path}: {where}: corrupt or unreadable ({exc})") from exc
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            raise TraceFormatError(f"{self.path}: {where}: unreadable values ({type(exc).__name__}: {exc})") from exc

    def columns(self, table: str) -> set[str]:
        with self.reading(table):
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})")}

    def ints(self, table: str, cols: Sequence[Col], where: str = "") -> list[np.ndarray]:
        """The columns as int64 arrays in rowid order, in one pass; a row whose value is not an
        integer (or NULL where a default is allowed) is an error naming the column."""
        have = self.require(table, cols)
        exprs = [c.name if c.default is None else f"COALESCE({c.name}, {c.default})" if c.name in have else str(c.default)
                 for c in cols]
        return self.fetch(table, exprs, type_check(cols, have), f"FROM {table} {where}",
                          lambda: self.check_types(table, cols, where))

    def require(self, table: str, cols: Sequence[Col]) -> set[str]:
        """The table's columns; a required one missing is an error naming it."""
        have = self.columns(table) | {"rowid"}
        for c in cols:
            if c.default is None and c.name not in have:
                raise TraceFormatError(f"{self.path}: {table} has no column {c.name} (columns: {', '.join(sorted(have))})")
        return have

    def fetch(self, label: str, exprs: Sequence[str], ok: str, source: str, diagnose: Callable[[], None]) -> list[np.ndarray]:
        """SELECT exprs (integers) FROM source as int64 columns, in one pass. `ok` is SQL that holds
        when a row's values have the right SQLite types; a row where it fails yields NULL, which
        stops the conversion, and diagnose() names the column (else one line naming label)."""
        first = exprs[0] if ok == "1" else f"CASE WHEN {ok} THEN {exprs[0]} END"
        sql = f"SELECT {', '.join([first, *exprs[1:]])} {source}"
        with self.reading(label):
            try:
                flat = np.fromiter(chain.from_iterable(self.con.execute(sql)), dtype=np.int64)
            except (ValueError, TypeError, OverflowError):
                diagnose()
                raise TraceFormatError(f"{self.path}: {label}: values of the wrong type (corrupt or foreign file)") from None
        block = flat.reshape(-1, len(exprs))
        return [np.ascontiguousarray(block[:, i]) for i in range(len(exprs))]

    def check_types(self, table: str, cols: Sequence[Col], where: str = "") -> None:
        """Raise naming the first column whose rows hold something other than integers (or NULL
        where a default is allowed)."""
        have = self.columns(table)
        for c in cols:
            if c.name not in have:
                continue
            allowed = "('integer')" if c.default is None else "('integer', 'null')"
            with self.reading(table):
                rows = self.con.execute(f"SELECT typeof({c.name}), count(*) FROM {table} {where} "
                                        f"{'AND' if where else 'WHERE'} typeof({c.name}) NOT IN {allowed} GROUP BY 1").fetchall()
            if rows:
                found = ", ".join(f"{n} {kind}" for kind, n in rows)
                raise TraceFormatError(f"{self.path}: {table}.{c.name} holds {found} value(s) where integers belong "
                                       "(corrupt or foreign file)")

    def texts(self, table: str, col: str, key: str = "rowid", where: str = "") -> tuple[np.ndarray, list[str | None]]:
        """(key, text) for every row; BLOBs and other non-text values are an error naming the column."""
        with self.reading(f"{table}.{col}"):
            rows = self.con.execute(f"SELECT {key}, {col} FROM {table} {where}").fetchall()
        values = [v for _, v in rows]
        kinds = set(map(type, values))
        if kinds - {str, type(None)}:
            bad = sum(1 for v in values if v is not None and not isinstance(v, str))
            raise TraceFormatError(f"{self.path}: {table}.{col} holds {bad} non-text value(s) (BLOB or number) where strings belong")
        with self.reading(f"{table}.{key}"):
            keys = np.array([k for k, _ in rows], dtype=np.int64)
        return keys, values

    def read_strings(self) -> None:
        if "StringIds" not in self.tables:
            return
        ids, values = self.texts("StringIds", "value", key="id")
        if any(v is None for v in values):
            raise TraceFormatError(f"{self.path}: StringIds.value holds NULL strings")
        self.strings = list(values)  # type: ignore[arg-type]
        order = np.argsort(ids, kind="stable")
        self._ids, self._pos = ids[order], order.astype(np.int64)

    def remap(self, ids: np.ndarray) -> np.ndarray:
        """StringIds ids -> positions in strings; unknown ids become one '<unknown>' entry."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        at = np.clip(np.searchsorted(self._ids, ids), 0, max(len(self._ids) - 1, 0))
        found = (self._ids[at] == ids) if len(self._ids) else np.zeros(len(ids), dtype=bool)
        if found.all():
            return self._pos[at]
        return np.where(found, self._pos[at] if len(self._pos) else 0, self.intern("<unknown>"))

    def intern(self, value: str) -> int:
        return int(self.intern_all([value])[0])

    def intern_all(self, values: list[str]) -> np.ndarray:
        """Positions in strings of each value, appending the new ones (each distinct value once)."""
        if len(self._lookup) != len(self.strings):
            self._lookup = {s: i for i, s in enumerate(self.strings)}
        lookup, strings = self._lookup, self.strings
        for v in dict.fromkeys(values):
            if v not in lookup:
                lookup[v] = len(strings)
                strings.append(v)
        return np.array([lookup[v] for v in values], dtype=np.int64)

    def check_times(self, table: str, start: np.ndarray, end: np.ndarray, open_end: bool = False) -> None:
        """Negative, backwards or overflowing times mean a corrupt file, not a verdict."""
        closed = end >= 0 if open_end else np.ones(len(end), dtype=bool)
        bad = (start < 0) | (start >= TIME_LIMIT) | (end >= TIME_LIMIT) | (closed & (end < start))
        if not open_end:
            bad |= end < 0
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceFormatError(f"{self.path}: {table}: {int(bad.sum())} row(s) with impossible start/end "
                                   f"(first: start {int(start[i])}, end {int(end[i])}; corrupt file)")


def read_kernels(db: SqliteTables) -> Kernels:
    cols = db.columns(KERNEL_TABLE)
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), "demangledName")
    start, end, dev, stream, corr, nid = db.ints(KERNEL_TABLE, [
        Col("start", None), Col("end", None), Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col(name)])
    db.check_times(KERNEL_TABLE, start, end)
    order = np.argsort(start, kind="stable")
    return Kernels(start[order], end[order], dev[order], stream[order], corr[order], db.remap(nid[order]))


def read_apis(db: SqliteTables) -> Apis:
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in db.tables:
        e = np.zeros(0, dtype=np.int64)
        return Apis(e, e, e, e, e)
    start, end, tid, corr, nid = db.ints(table, [Col("start", None), Col("end", None), Col("globalTid"),
                                                 Col("correlationId"), Col("nameId")])
    db.check_times(table, start, end)
    order = np.argsort(corr, kind="stable")
    return Apis(start[order], end[order], tid[order], corr[order], db.remap(nid[order]))


def read_ranges(db: SqliteTables) -> Ranges:
    if "NVTX_EVENTS" not in db.tables:
        e = np.zeros(0, dtype=np.int64)
        return Ranges(e, e, e, e)
    where = f"WHERE eventType IN {RANGE_EVENT_TYPES}"
    rowid, start, end, tid, text_id = db.ints("NVTX_EVENTS", [Col("rowid", None), Col("start", None), Col("end"),
                                                              Col("globalTid"), Col("textId")], where)
    db.check_times("NVTX_EVENTS", start, end, open_end=True)
    names = db.remap(text_id)
    if (text_id < 0).any():
        names[text_id < 0] = db.intern("<unnamed>")
    if "text" in db.columns("NVTX_EVENTS"):
        keys, texts = db.texts("NVTX_EVENTS", "text", where=f"{where} AND text IS NOT NULL")
        if len(keys):
            by_rowid = np.argsort(rowid, kind="stable")
            at = by_rowid[np.searchsorted(rowid[by_rowid], keys)]
            names[at] = db.intern_all(texts)  # type: ignore[arg-type]
    order = np.argsort(start, kind="stable")
    return Ranges(start[order], end[order], tid[order], names[order])


def read_records(db: SqliteTables) -> tuple[EventRecord, ...]:
    table = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
    if table not in db.tables:
        return ()
    cols = db.ints(table, [Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col("eventSyncId")])
    order = np.argsort(cols[2], kind="stable")
    return tuple(EventRecord(*r) for r in zip(*(c[order].tolist() for c in cols)))


def read_syncs(db: SqliteTables, apis: Apis) -> tuple[Sync, ...]:
    table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if table not in db.tables:
        return ()
    cols = db.ints(table, [Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col("syncType", 0),
                           Col("eventSyncId"), Col("start", None), Col("end", None)])
    db.check_times(table, cols[5], cols[6])
    order = np.argsort(cols[2], kind="stable")
    dev, stream, corr, stype, key, start, end = (c[order].tolist() for c in cols)
    found = apis.index_of(np.asarray(corr, dtype=np.int64))
    names = np.where(found >= 0, apis.name[found], -1).tolist() if len(apis.name) else [-1] * len(corr)
    tids = np.where(found >= 0, apis.tid[found], -1).tolist() if len(apis.tid) else [-1] * len(corr)
    kinds: dict[int, tuple[str, SyncKind | None]] = {-1: ("", None)}
    out = []
    for n, name in enumerate(names):
        if name not in kinds:
            kinds[name] = (db.strings[name], classify_api(db.strings[name]))
        api, by_name = kinds[name]
        kind = by_name or SYNC_TYPE.get(stype[n], SyncKind.UNKNOWN)
        out.append(Sync(kind, dev[n], stream[n] if kind in (SyncKind.WAIT, SyncKind.STREAM) else -1, corr[n],
                        key[n] if kind in (SyncKind.WAIT, SyncKind.EVENT) else -1, start[n], end[n], tids[n], api))
    return tuple(out)


def read_meta(db: SqliteTables) -> dict[str, str]:
    if "META_DATA_EXPORT" not in db.tables:
        return {}
    with db.reading("META_DATA_EXPORT"):
        rows = db.con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()
    return {str(k): v if isinstance(v, str) else repr(v) for k, v in rows}


def record_errors(meta: dict[str, str]) -> dict[str, tuple[int, str]]:
    """TRACER_RECORD_ERRORS_<record type> = 'N records lost: first error' -> {type: (N, first error)};
    N is -1 where the value does not say."""
    out = {}
    for key, value in meta.items():
        if key.startswith(RECORD_ERRORS):
            m = re.match(r"\s*(\d+) records? lost:?\s*(.*)", value)
            out[key[len(RECORD_ERRORS):]] = (int(m.group(1)), m.group(2)) if m else (-1, value)
    return out


def _count(db: SqliteTables, table: str) -> int:
    if table not in db.tables:
        return 0
    with db.reading(table):
        return int(db.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def read_nsys_sqlite(path: Path) -> Trace:
    con = connect(path)
    try:
        db = SqliteTables(con, path)
        if KERNEL_TABLE not in db.tables:
            raise TraceFormatError(f"{path}: no {KERNEL_TABLE} table (not an nsys export with CUDA tracing, "
                                   "or a capture that recorded no kernel)")
        meta = read_meta(db)
        db.read_strings()
        kernels = read_kernels(db)
        apis = read_apis(db)
        ranges = read_ranges(db)
        records = read_records(db)
        syncs = read_syncs(db, apis)
        from tracer.trace.memory import read_memory  # memory.py builds on this module's readers

        memory = read_memory(db, meta)
        producer = (f"tracer-{meta['TRACER_PRODUCER']} {meta.get('EXPORT_PRODUCT_VERSION', '')}" if "TRACER_PRODUCER" in meta
                    else f"nsys {meta.get('EXPORT_PRODUCT_VERSION', '?')} schema {meta.get('EXPORT_SCHEMA_VERSION', '?')}")
        return Trace(str(path), producer.strip(), db.strings, kernels, apis, ranges, records, syncs,
                     _count(db, "CUPTI_ACTIVITY_KIND_MEMCPY"), _count(db, "CUPTI_ACTIVITY_KIND_MEMSET"), meta,
                     record_errors(meta), memory)
    finally:
        con.close()
