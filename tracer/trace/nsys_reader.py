"""Reads Nsight Systems SQLite exports (schema 3.x) and tracer's CUPTI captures, which share it.

Tables exist only when they have rows and columns drift between versions, so every table and
column is optional except the kernel table; strings live in StringIds.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from tracer.errors import TraceFormatError
from tracer.trace.model import Apis, EventRecord, Kernels, Ranges, Sync, SyncKind, Trace, empty_ints

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RANGE_EVENT_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXt twins
CHUNK = 200_000
SYNC_TYPE = {1: SyncKind.EVENT, 2: SyncKind.WAIT, 3: SyncKind.STREAM, 4: SyncKind.CONTEXT}


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


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _col(cols: set[str], name: str, default: str = "-1") -> str:
    return f"COALESCE({name}, {default})" if name in cols else default


def _int_columns(con: sqlite3.Connection, sql: str, ncols: int) -> list[np.ndarray]:
    """Run sql and return its columns as int64 arrays, fetching in chunks to bound memory."""
    parts: list[np.ndarray] = []
    cur = con.execute(sql)
    while True:
        rows = cur.fetchmany(CHUNK)
        if not rows:
            break
        parts.append(np.array(rows, dtype=np.int64).reshape(len(rows), ncols))
    block = np.concatenate(parts) if parts else np.zeros((0, ncols), dtype=np.int64)
    return [np.ascontiguousarray(block[:, i]) for i in range(ncols)]


def read_strings(con: sqlite3.Connection, tables: set[str]) -> tuple[list[str], dict[int, int]]:
    """(strings, StringIds id -> index in strings)."""
    if "StringIds" not in tables:
        return [], {}
    rows = con.execute("SELECT id, value FROM StringIds").fetchall()
    return [v for _, v in rows], {i: n for n, (i, _) in enumerate(rows)}


def _remap(ids: np.ndarray, index: dict[int, int], strings: list[str]) -> np.ndarray:
    """StringIds ids -> positions in strings; unknown ids become one '<unknown>' entry."""
    unknown = len(strings)
    out = np.fromiter((index.get(int(i), unknown) for i in ids), dtype=np.int64, count=len(ids)) if len(ids) else empty_ints()
    if len(out) and (out == unknown).any():
        strings.append("<unknown>")
    return out


def read_kernels(con: sqlite3.Connection, index: dict[int, int], strings: list[str]) -> Kernels:
    cols = _columns(con, KERNEL_TABLE)
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), None)
    sql = (f"SELECT start, end, {_col(cols, 'deviceId', '0')}, {_col(cols, 'streamId')}, {_col(cols, 'correlationId')}, "
           f"{_col(cols, name) if name else '-1'} FROM {KERNEL_TABLE} ORDER BY start")
    start, end, dev, stream, corr, nid = _int_columns(con, sql, 6)
    return Kernels(start, end, dev, stream, corr, _remap(nid, index, strings))


def read_apis(con: sqlite3.Connection, tables: set[str], index: dict[int, int], strings: list[str]) -> Apis:
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        e = empty_ints()
        return Apis(e, e, e, e, e)
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME")
    sql = (f"SELECT start, end, {_col(cols, 'globalTid')}, {_col(cols, 'correlationId')}, {_col(cols, 'nameId')} "
           "FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY correlationId")
    start, end, tid, corr, nid = _int_columns(con, sql, 5)
    return Apis(start, end, tid, corr, _remap(nid, index, strings))


def read_ranges(con: sqlite3.Connection, tables: set[str], index: dict[int, int], strings: list[str]) -> Ranges:
    if "NVTX_EVENTS" not in tables:
        e = empty_ints()
        return Ranges(e, e, e, e)
    cols = _columns(con, "NVTX_EVENTS")
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    rows = con.execute(
        f"SELECT start, COALESCE(end, -1), COALESCE(globalTid, -1), {text}, {text_id} FROM NVTX_EVENTS "
        f"WHERE eventType IN {RANGE_EVENT_TYPES} ORDER BY start").fetchall()
    lookup = {s: i for i, s in enumerate(strings)}
    names = np.empty(len(rows), dtype=np.int64)
    for n, (_, _, _, txt, tid_) in enumerate(rows):
        value = txt if txt is not None else (strings[index[tid_]] if tid_ in index else "<unnamed>")
        if value not in lookup:
            lookup[value] = len(strings)
            strings.append(value)
        names[n] = lookup[value]
    arr = np.array([r[:3] for r in rows], dtype=np.int64).reshape(len(rows), 3)
    return Ranges(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), names)


def read_records(con: sqlite3.Connection, tables: set[str]) -> tuple[EventRecord, ...]:
    if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" not in tables:
        return ()
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_CUDA_EVENT")
    sql = (f"SELECT {_col(cols, 'deviceId', '0')}, {_col(cols, 'streamId')}, {_col(cols, 'correlationId')}, "
           f"{_col(cols, 'eventSyncId')} FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT ORDER BY correlationId")
    return tuple(EventRecord(*r) for r in con.execute(sql))


def read_syncs(con: sqlite3.Connection, tables: set[str], apis: Apis, strings: list[str]) -> tuple[Sync, ...]:
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" not in tables:
        return ()
    cols = _columns(con, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    sql = (f"SELECT {_col(cols, 'deviceId', '0')}, {_col(cols, 'streamId')}, {_col(cols, 'correlationId')}, "
           f"{_col(cols, 'syncType', '0')}, {_col(cols, 'eventSyncId')}, start, end FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION "
           "ORDER BY correlationId")
    rows = con.execute(sql).fetchall()
    found = apis.index_of(np.array([r[2] for r in rows], dtype=np.int64))
    out = []
    for (dev, stream, corr, stype, key, start, end), i in zip(rows, found):
        api = strings[int(apis.name[i])] if i >= 0 else ""
        kind = classify_api(api) if api else None
        kind = kind or SYNC_TYPE.get(stype, SyncKind.UNKNOWN)
        tid = int(apis.tid[i]) if i >= 0 else -1
        out.append(Sync(kind, dev, stream if kind in (SyncKind.WAIT, SyncKind.STREAM) else -1, corr,
                        key if kind in (SyncKind.WAIT, SyncKind.EVENT) else -1, start, end, tid, api))
    return tuple(out)


def _count(con: sqlite3.Connection, tables: set[str], table: str) -> int:
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] if table in tables else 0


def read_nsys_sqlite(path: Path) -> Trace:
    con = connect(path)
    try:
        tables = _tables(con)
        if KERNEL_TABLE not in tables:
            raise TraceFormatError(f"{path}: no {KERNEL_TABLE} table (not an nsys export with CUDA tracing, "
                                   "or a capture that recorded no kernel)")
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT").fetchall()) if "META_DATA_EXPORT" in tables else {}
        strings, index = read_strings(con, tables)
        kernels = read_kernels(con, index, strings)
        apis = read_apis(con, tables, index, strings)
        ranges = read_ranges(con, tables, index, strings)
        records = read_records(con, tables)
        syncs = read_syncs(con, tables, apis, strings)
        producer = (f"tracer-{meta['TRACER_PRODUCER']} {meta.get('EXPORT_PRODUCT_VERSION', '')}" if "TRACER_PRODUCER" in meta
                    else f"nsys {meta.get('EXPORT_PRODUCT_VERSION', '?')} schema {meta.get('EXPORT_SCHEMA_VERSION', '?')}")
        return Trace(str(path), producer.strip(), strings, kernels, apis, ranges, records, syncs,
                     _count(con, tables, "CUPTI_ACTIVITY_KIND_MEMCPY"), _count(con, tables, "CUPTI_ACTIVITY_KIND_MEMSET"), meta)
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(f"{path}: unreadable nsys export ({exc})") from exc
    finally:
        con.close()
