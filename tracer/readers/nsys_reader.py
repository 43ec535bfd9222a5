"""Reads Nsight Systems SQLite exports (schema 3.x) and tracer's CUPTI captures, which share it.

Tables exist only when they have rows and columns drift between versions, so every table and
column is optional except the kernel table; strings live in StringIds. Columns come straight into
numpy (one pass over the rows, checked for their SQLite type in the same query); anything that is
not what the schema promises (a corrupt page, text or a real where an integer belongs, NULL starts,
strings stored as BLOBs) is one TraceFormatError naming the table and column.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracer.errors import TraceFormatError
from tracer.format.memory_tables import FLAG, MEMORY_TABLES
from tracer.model.arrays import unique
from tracer.model.trace import (MEMCPY, MEMSET, PROCESS_SHIFT, Apis, EventRecord, Kernels, Ranges, StreamOrigin, Sync, SyncKind,
                                Trace, Transfers, raw_id)
from tracer.readers.sqlite_tables import Col, SqliteTables, connect

if TYPE_CHECKING:
    from tracer.model.memory import Memory

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE, MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
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


def read_kernels(db: SqliteTables, allow_empty: bool = False) -> tuple[Kernels, np.ndarray, np.ndarray]:
    """The kernels sorted by start, with raw stream and correlation ids, each one's process
    (globalPid >> 24; -1 unknown) and whether a CUDA graph replayed it (graphId or graphNodeId set). nsys creates the kernel table
    only for kernels, so an empty one is a damaged export; tracer's own captures (allow_empty)
    write it for a process that launched nothing."""
    cols = db.columns(KERNEL_TABLE)
    name = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), "demangledName")
    wanted = [Col("start", None), Col("end", None), Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col(name),
              Col("globalPid"), Col("graphId", 0), Col("graphNodeId", 0)]
    start, end, dev, stream, corr, nid, pid, graph, node = db.ints(KERNEL_TABLE, wanted)
    if len(start) == 0 and not allow_empty:
        raise TraceFormatError(f"{db.path}: {KERNEL_TABLE} has no rows (nsys creates the table only for kernels: "
                               "an emptied or truncated export)")
    db.check_times(KERNEL_TABLE, start, end, corr=corr)
    order = np.argsort(start, kind="stable")
    graphs = "graphNodeId" in cols  # graph launches are ordered on their launch stream (graphs.py)
    return (Kernels(start=start[order], end=end[order], device=dev[order], stream=stream[order], corr=corr[order], name=db.remap(nid[order]),
                    graph_node=node[order] if graphs else None), _process_of(pid[order]), ((graph != 0) | (node != 0))[order])


def check_correlation(path: Path, k: Kernels, graph: np.ndarray) -> None:
    """One launch call makes one kernel, so kernels of a process share a correlation id only when a
    CUDA graph launch replayed them (graphId set): shared ids otherwise mean a damaged file, in which
    stream order (correlation order) could not be told and every pair would go unjudged."""
    plain = k.corr[~graph]
    if len(plain) < 2:
        return
    ordered = np.sort(plain)
    dup = ordered[1:] == ordered[:-1]
    if dup.any():
        first = int(ordered[1:][dup][0])
        raise TraceFormatError(f"{path}: {KERNEL_TABLE}: {int(dup.sum())} kernel(s) outside CUDA graphs share a "
                               f"correlationId with another kernel of their process (first: {raw_id(first)}); "
                               "one launch makes one kernel: corrupt file")


def check_contexts(db: SqliteTables) -> None:
    """Stream ids are unique within a CUDA context (CUPTI's word), and streams are keyed by process
    and device: two contexts of one process on one device that both use a stream id would be read
    as one stream, their work as ordered by stream order. No capture of ours holds such a pair; one
    that does is refused rather than judged. One context per process and device (every capture we
    have) is told from a DISTINCT of three columns; only otherwise are the streams looked at."""
    tables = [t for t in (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE)
              if t in db.tables and {"globalPid", "deviceId", "streamId", "contextId"} <= db.columns(t)]
    if not tables:
        return
    with db.reading("contextId"):
        contexts = {(_process_part(p), d, c) for t in tables
                    for p, d, c in db.con.execute(f"SELECT DISTINCT globalPid, deviceId, contextId FROM {t}")}
        if len({(p, d) for p, d, _ in contexts}) == len(contexts):
            return
        rows = {(_process_part(p), d, st, c) for t in tables
                for p, d, st, c in db.con.execute(f"SELECT DISTINCT globalPid, deviceId, streamId, contextId FROM {t}")}
    first: dict[tuple[object, object, object], object] = {}
    for pid, dev, stream, ctx in sorted(rows, key=repr):
        seen = first.setdefault((pid, dev, stream), ctx)
        if seen != ctx:
            shown = pid & 0xFFFFFF if isinstance(pid, int) and pid >= 0 else pid
            raise TraceFormatError(f"{db.path}: stream {stream} of process {shown} on device {dev} runs work of contexts "
                                   f"{seen} and {ctx}; stream ids are per context, so which stream each operation ran on "
                                   "cannot be told (a merged or edited export; capture each context's work apart)")


def _process_part(global_pid: object) -> object:
    """One globalPid's process part, as _process_of gives it for a column (-1: NULL or negative; a
    value that is not an integer is kept, to be named)."""
    if global_pid is None:
        return -1
    return (global_pid >> 24 if global_pid >= 0 else -1) if isinstance(global_pid, int) else global_pid


def _process_of(global_id: np.ndarray) -> np.ndarray:
    """globalPid or globalTid = (hw << 56) | (vm << 48) | (pid << 24) | tid -> the process part (-1 unknown)."""
    return np.where(global_id >= 0, global_id >> 24, -1)


class ProcessKeys:
    """Trace-unique stream keys, correlation ids and event keys (tracer.model.trace): the process's
    index among the trace's distinct processes goes above PROCESS_SHIFT."""

    def __init__(self, path: Path, *processes: np.ndarray) -> None:
        self.path = path
        self.procs = unique(np.concatenate(processes)) if processes else np.zeros(0, dtype=np.int64)
        self.several = len(self.procs) > 1

    def key(self, raw: np.ndarray, proc: np.ndarray, what: str) -> np.ndarray:
        """raw ids of the given processes -> keys (negative ids, 'none', are kept)."""
        raw = np.asarray(raw, dtype=np.int64)
        if not self.several or len(raw) == 0:
            return raw
        if (raw >= 1 << PROCESS_SHIFT).any():
            bad = int(raw[np.argmax(raw >= 1 << PROCESS_SHIFT)])
            raise TraceFormatError(f"{self.path}: {what} {bad} beyond 2**{PROCESS_SHIFT} in an export of several processes")
        index = np.searchsorted(self.procs, np.asarray(proc, dtype=np.int64))
        return np.where(raw >= 0, (index << PROCESS_SHIFT) | raw, raw)

    def pids(self) -> tuple[int, ...]:
        """The pid of each process index (-1 unknown)."""
        return tuple(int(p) & 0xFFFFFF if p >= 0 else -1 for p in self.procs.tolist())

    def origins(self, stream_keys: np.ndarray, raw: np.ndarray, device: np.ndarray, proc: np.ndarray) -> dict[int, StreamOrigin]:
        pids = dict(zip(self.procs.tolist(), self.pids()))
        seen: dict[int, StreamOrigin] = {}
        _, first = np.unique(stream_keys, return_index=True)
        for i in first.tolist():
            seen[int(stream_keys[i])] = StreamOrigin(pids.get(int(proc[i]), -1), int(device[i]), int(raw[i]))
        return seen


def read_transfers(db: SqliteTables) -> tuple[Transfers, np.ndarray]:
    """Copies and memsets, the same columns as kernels plus their kind and bytes, and each one's
    process (as read_kernels gives it)."""
    parts: list[list[np.ndarray]] = []
    for table, code in ((MEMCPY_TABLE, MEMCPY), (MEMSET_TABLE, MEMSET)):
        if table not in db.tables:
            continue
        kind = Col("copyKind", 0) if code == MEMCPY else Col("rowid", None)
        cols = db.ints(table, [Col("start", None), Col("end", None), Col("deviceId", 0), Col("streamId"), Col("correlationId"),
                               kind, Col("bytes", -1), Col("graphNodeId", 0), Col("globalPid")])
        db.check_times(table, cols[0], cols[1], corr=cols[4])
        cols[8] = _process_of(cols[8])
        if code == MEMSET:
            cols[5] = np.zeros(len(cols[0]), dtype=np.int64)
        parts.append(cols + [np.full(len(cols[0]), code, dtype=np.int64)])
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        parts = [[e] * 10]
    start, end, dev, stream, corr, copy_kind, size, node, proc, op = (np.concatenate(c) for c in zip(*parts))
    o = np.argsort(start, kind="stable")
    return Transfers(start=start[o], end=end[o], device=dev[o], stream=stream[o], corr=corr[o], op=op[o],
                     copy_kind=copy_kind[o], bytes=size[o], graph_node=node[o]), proc[o]


API_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
# Below this many API calls, a second connection and a thread cost more than they overlap: the table
# is read in the caller's thread (start-up on small traces, issue 27; docs/benchmarks.md).
THREADED_API_ROWS = 20_000


def fetch_apis(db: SqliteTables) -> Apis:
    """The runtime and driver calls sorted by correlation id, with their StringIds ids as names
    (read on a connection of its own beside the other tables; named_apis maps the names)."""
    table = API_TABLE
    if table not in db.tables:
        e = np.zeros(0, dtype=np.int64)
        return Apis(start=e, end=e, tid=e, corr=e, name=e)
    start, end, tid, corr, nid = db.ints(table, [Col("start", None), Col("end", None), Col("globalTid"),
                                                 Col("correlationId"), Col("nameId")])
    db.check_times(table, start, end, corr=corr)
    return Apis(start=start, end=end, tid=tid, corr=corr, name=nid)


def named_apis(db: SqliteTables, fetched: Apis, keys: ProcessKeys) -> Apis:
    """The calls with names mapped and correlation ids keyed by process, sorted by them."""
    corr = keys.key(fetched.corr, _process_of(fetched.tid), "correlationId")
    order = np.argsort(corr, kind="stable")
    return Apis(start=fetched.start[order], end=fetched.end[order], tid=fetched.tid[order], corr=corr[order], name=db.remap(fetched.name[order]))


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


EVENT_TABLE, SYNC_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RECORD_COLS = [Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col("eventSyncId"), Col("globalPid")]
SYNC_COLS = [Col("deviceId", 0), Col("streamId"), Col("correlationId"), Col("syncType", 0), Col("eventSyncId"),
             Col("start", None), Col("end", None), Col("globalPid")]


def fetch_table(db: SqliteTables, table: str, cols: list[Col]) -> list[np.ndarray]:
    """The columns, or empty ones when the export has no such table; the last column is globalPid,
    turned into the process part."""
    if table not in db.tables:
        return [np.zeros(0, dtype=np.int64) for _ in cols]
    out = db.ints(table, cols)
    return out[:-1] + [_process_of(out[-1])]


def key_by_process(cols: list[np.ndarray], keys: ProcessKeys, at: dict[str, int]) -> list[np.ndarray]:
    """Stream, correlation and event-sync columns (positions in `at`) keyed by the rows' process (last column)."""
    out = list(cols)
    for what, i in at.items():
        out[i] = keys.key(cols[i], cols[-1], what)
    return out


def read_records(cols: list[np.ndarray]) -> tuple[EventRecord, ...]:
    order = np.argsort(cols[2], kind="stable")
    return tuple(EventRecord(*r) for r in zip(*(c[order].tolist() for c in cols[:4])))


def read_syncs(db: SqliteTables, cols: list[np.ndarray], apis: Apis) -> tuple[Sync, ...]:
    if not len(cols[0]):
        return ()
    db.check_times(SYNC_TABLE, cols[5], cols[6], corr=cols[2] & ((1 << PROCESS_SHIFT) - 1))
    cols = cols[:7]
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


def start_memory(db: SqliteTables, meta: dict[str, str]) -> Callable[[], Memory | None]:
    """memory_reader.start_memory for a trace with a TRACER_ memory table or the TRACER_MEMORY flag;
    for any other, a function giving None, with neither the memory reader nor its model imported
    (start-up: issue 27)."""
    if meta.get(FLAG) != "1" and not any(t in db.tables for t in MEMORY_TABLES):
        return lambda: None
    from tracer.readers.memory_reader import start_memory as start

    return start(db, meta)


def read_nsys_sqlite(path: Path) -> Trace:
    con = connect(path)
    try:
        db = SqliteTables(con, path)
        if KERNEL_TABLE not in db.tables:
            raise TraceFormatError(f"{path}: no {KERNEL_TABLE} table (not an nsys export with CUDA tracing, "
                                   "or a capture that recorded no kernel)")
        meta = read_meta(db)
        memory, fetching_apis = start_memory(db, meta), db.in_sibling(fetch_apis, threaded=not db.rows_at_most(API_TABLE, THREADED_API_ROWS))
        db.read_strings()
        kernels, k_proc, graph = read_kernels(db, allow_empty="TRACER_PRODUCER" in meta)
        check_contexts(db)
        ranges = read_ranges(db)
        rec_cols, sync_cols = fetch_table(db, EVENT_TABLE, RECORD_COLS), fetch_table(db, SYNC_TABLE, SYNC_COLS)
        fetched = fetching_apis.result()
        transfers, t_proc = read_transfers(db)
        keys = ProcessKeys(path, k_proc, rec_cols[-1], sync_cols[-1], _process_of(fetched.tid), t_proc)
        raw_stream = kernels.stream
        kernels = replace(kernels, stream=keys.key(kernels.stream, k_proc, "streamId"),
                          corr=keys.key(kernels.corr, k_proc, "correlationId"))
        check_correlation(path, kernels, graph)
        raw_t_stream = transfers.stream
        transfers = replace(transfers, stream=keys.key(transfers.stream, t_proc, "streamId"),
                            corr=keys.key(transfers.corr, t_proc, "correlationId"))
        rec_cols = key_by_process(rec_cols, keys, {"streamId": 1, "correlationId": 2, "eventSyncId": 3})
        sync_cols = key_by_process(sync_cols, keys, {"streamId": 1, "correlationId": 2, "eventSyncId": 4})
        records, apis = read_records(rec_cols), named_apis(db, fetched, keys)
        syncs = read_syncs(db, sync_cols, apis)
        mem = memory()
        if mem is not None and keys.several:
            raise TraceFormatError(f"{path}: memory access tables in a trace of {len(keys.procs)} processes "
                                   "(tracer captures one process per file; a merged file is not supported)")
        producer = (f"tracer-{meta['TRACER_PRODUCER']} {meta.get('EXPORT_PRODUCT_VERSION', '')}" if "TRACER_PRODUCER" in meta
                    else f"nsys {meta.get('EXPORT_PRODUCT_VERSION', '?')} schema {meta.get('EXPORT_SCHEMA_VERSION', '?')}")
        origins = keys.origins(np.concatenate([kernels.stream, transfers.stream]), np.concatenate([raw_stream, raw_t_stream]),
                               np.concatenate([kernels.device, transfers.device]), np.concatenate([k_proc, t_proc]))
        return Trace(source=str(path), producer=producer.strip(), strings=db.strings, kernels=kernels, apis=apis, ranges=ranges, records=records,
                     syncs=syncs,
                     memcpy_count=int((transfers.op == MEMCPY).sum()), memset_count=int((transfers.op == MEMSET).sum()), meta=meta,
                     record_errors=record_errors(meta), memory=mem, transfers=transfers, streams=origins,
                     processes=keys.pids() if keys.several else ())
    finally:
        con.close()
