"""Reads Nsight Systems SQLite exports (schema 3.x) and tracer's CUPTI captures, which share it.

Tables exist only when they have rows and columns drift between versions, so every table and
column is optional except the kernel table; strings live in StringIds. Columns come straight into
numpy (one pass over the rows, checked for their SQLite type in the same query); anything that is
not what the schema promises (a corrupt page, text or a real where an integer belongs, NULL starts,
strings stored as BLOBs) is one TraceFormatError naming the table and column.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from tracer.errors import TraceFormatError
from tracer.trace.memory import start_memory
from tracer.trace.model import Apis, EventRecord, Kernels, Ranges, Sync, SyncKind, Trace
from tracer.trace.sqlite_tables import Col, SqliteTables, connect

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RANGE_EVENT_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXt twins
SYNC_TYPE = {1: SyncKind.EVENT, 2: SyncKind.WAIT, 3: SyncKind.STREAM, 4: SyncKind.CONTEXT}
RECORD_ERRORS = "TRACER_RECORD_ERRORS_"


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


def read_kernels(db: SqliteTables) -> Kernels:
    cols = db.columns(KERNEL_TABLE)
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), "demangledName")
    wanted = [Col("start", None), Col("end", None), Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col(name)]
    graphs = _has_rows(db, "TRACER_GRAPH_NODES")  # graph nodes matter only to join memory access sets
    start, end, dev, stream, corr, nid, *node = db.ints(KERNEL_TABLE, wanted + [Col("graphNodeId", 0)] * graphs)
    db.check_times(KERNEL_TABLE, start, end)
    order = np.argsort(start, kind="stable")
    return Kernels(start=start[order], end=end[order], device=dev[order], stream=stream[order], corr=corr[order], name=db.remap(nid[order]),
                   graph_node=node[0][order] if node else None)


def _has_rows(db: SqliteTables, table: str) -> bool:
    if table not in db.tables:
        return False
    with db.reading(table):
        return db.con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None


def fetch_apis(db: SqliteTables) -> Apis:
    """The runtime and driver calls sorted by correlation id, with their StringIds ids as names
    (read on a connection of its own beside the other tables; named_apis maps the names)."""
    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if table not in db.tables:
        e = np.zeros(0, dtype=np.int64)
        return Apis(start=e, end=e, tid=e, corr=e, name=e)
    start, end, tid, corr, nid = db.ints(table, [Col("start", None), Col("end", None), Col("globalTid"),
                                                 Col("correlationId"), Col("nameId")])
    db.check_times(table, start, end)
    order = np.argsort(corr, kind="stable")
    return Apis(start=start[order], end=end[order], tid=tid[order], corr=corr[order], name=nid[order])


def named_apis(db: SqliteTables, fetched: Apis) -> Apis:
    return replace(fetched, name=db.remap(fetched.name))


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
            names[at] = db.intern_all(texts)  # type: ignore[arg-type]  # the query keeps no NULL text (text IS NOT NULL)
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
        out.append(Sync(kind=kind, device=dev[n], stream=stream[n] if kind in (SyncKind.WAIT, SyncKind.STREAM) else -1, corr=corr[n],
                        key=key[n] if kind in (SyncKind.WAIT, SyncKind.EVENT) else -1, start=start[n], end=end[n], tid=tids[n], api=api))
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
        memory, fetching_apis = start_memory(db, meta), db.in_sibling(fetch_apis)
        db.read_strings()
        kernels = read_kernels(db)
        ranges = read_ranges(db)
        records = read_records(db)
        apis = named_apis(db, fetching_apis.result())
        syncs = read_syncs(db, apis)
        producer = (f"tracer-{meta['TRACER_PRODUCER']} {meta.get('EXPORT_PRODUCT_VERSION', '')}" if "TRACER_PRODUCER" in meta
                    else f"nsys {meta.get('EXPORT_PRODUCT_VERSION', '?')} schema {meta.get('EXPORT_SCHEMA_VERSION', '?')}")
        return Trace(source=str(path), producer=producer.strip(), strings=db.strings, kernels=kernels, apis=apis, ranges=ranges, records=records,
                     syncs=syncs,
                     memcpy_count=_count(db, "CUPTI_ACTIVITY_KIND_MEMCPY"), memset_count=_count(db, "CUPTI_ACTIVITY_KIND_MEMSET"), meta=meta,
                     record_errors=record_errors(meta), memory=memory())
    finally:
        con.close()
