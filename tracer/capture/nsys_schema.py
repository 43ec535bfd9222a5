"""Writes activity records as SQLite in the Nsight Systems export schema (same table and column
names), so one reader serves nsys exports and tracer's own CUPTI captures."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tracer import __version__
from tracer.capture.demangle import demangle, short_name
from tracer.capture.records import (AccessRec, AllocationRec, ApiRec, EventRec, HostQueryRec, KernelRec, LaunchUnknownRec,
                                    OpRec, StreamRec, SyncRec, TraceRecords)
from tracer.interner import Interner

SCHEMA_FOLLOWED = "3.25.0"
PUSHPOP_RANGE, STARTEND_RANGE, MARK, DOMAIN_CREATE = 59, 60, 34, 75
SYNC_TYPES = [(0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
              (1, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE", "Event sync"),
              (2, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT", "Stream wait sync"),
              (3, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE", "Stream sync"),
              (4, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE", "Context sync")]

TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, "
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER, "
    "mangledName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, "
    "registersPerThread INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER, graphId INTEGER, graphNodeId INTEGER",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, "
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, syncType INTEGER, eventId INTEGER, eventSyncId INTEGER",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": "timestamp INTEGER, deviceId INTEGER, contextId INTEGER, streamId INTEGER, "
    "correlationId INTEGER, globalPid INTEGER, eventId INTEGER, eventSyncId INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, "
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, "
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER",
    "TARGET_INFO_CUDA_STREAM": "streamId INTEGER NOT NULL, hwId INTEGER, vmId INTEGER, processId INTEGER, "
    "contextId INTEGER, priority INTEGER, flag INTEGER",
}
# Memory access sets (`trace run --memory`): the contract is docs/design/capture-memory-jobs.md.
MEMORY_TABLES = {
    "TRACER_OPS": "id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, nameId INTEGER, globalTid INTEGER, start INTEGER, "
    "end INTEGER, seqNr INTEGER, bwdSeqNr INTEGER, correlationId INTEGER, callsiteId INTEGER",
    "TRACER_EXTERNAL_CORRELATION": "correlationId INTEGER NOT NULL, externalId INTEGER NOT NULL",
    "TRACER_MEMORY_ACCESS": "opId INTEGER NOT NULL, address INTEGER NOT NULL, bytes INTEGER NOT NULL, mode INTEGER NOT NULL, "
    "exact INTEGER NOT NULL, allocationId INTEGER, labelId INTEGER",
    "TRACER_ALLOCATIONS": "id INTEGER PRIMARY KEY, deviceId INTEGER, address INTEGER NOT NULL, bytes INTEGER NOT NULL, "
    "streamId INTEGER, start INTEGER, end INTEGER, source INTEGER, labelId INTEGER",
    "TRACER_HOST_QUERIES": "correlationId INTEGER NOT NULL, kind INTEGER NOT NULL, recordCorrelationId INTEGER, "
    "streamId INTEGER, start INTEGER, end INTEGER, globalTid INTEGER",
    "TRACER_LAUNCH_UNKNOWN": "correlationId INTEGER NOT NULL, nameId INTEGER, reason TEXT",
}


def global_tid(pid: int, tid: int) -> int:
    """nsys's layout: (hw << 56) | (vm << 48) | (pid << 24) | tid."""
    return (pid << 24) | (tid & 0xFFFFFF)


def nvtx_rows(rec: TraceRecords) -> list[tuple]:
    """Pair START/END markers by id into ranges; domains become NvtxDomainCreate rows."""
    gpid = rec.pid
    domains: dict[str, int] = {}
    starts: dict[int, tuple] = {}
    rows: list[tuple] = []
    for flags, ts, mid, tid, name, domain in sorted(rec.markers, key=lambda m: m[1]):
        dom = domains.setdefault(domain, len(domains) + 1) if domain else 0
        if flags & 2:
            starts[mid] = (ts, tid, name, dom)
        elif flags & 4 and mid in starts:
            t0, tid0, text, dom0 = starts.pop(mid)
            kind = PUSHPOP_RANGE if tid0 == tid else STARTEND_RANGE
            rows.append((t0, ts, kind, None, None, None, text, global_tid(gpid, tid0), global_tid(gpid, tid), None, dom0))
        elif flags & 1:
            rows.append((ts, None, MARK, None, None, None, name, global_tid(gpid, tid), None, None, dom))
    for t0, tid0, text, dom0 in starts.values():  # never closed (the target died inside the range)
        rows.append((t0, None, PUSHPOP_RANGE, None, None, None, text, global_tid(gpid, tid0), None, None, dom0))
    rows += [(0, None, DOMAIN_CREATE, None, None, None, name, None, None, None, did) for name, did in domains.items()]
    return rows


def _kernel_row(k: KernelRec, gpid: int, s: Interner) -> tuple:
    full = demangle(k.name)
    return (k.start, k.end, k.device_id, k.context_id, k.stream_id, k.correlation_id, gpid, s(full), s(short_name(full)),
            s(k.name), k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread,
            k.static_shared_memory, k.dynamic_shared_memory, k.graph_id, k.graph_node_id)


def table_rows(rec: TraceRecords) -> tuple[dict[str, list[tuple]], Interner]:
    s, gpid = Interner(), rec.pid << 24
    kernels = [KernelRec(*k) for k in rec.kernels]
    ctx_dev = {k.context_id: k.device_id for k in kernels}
    syncs = [SyncRec(*y) for y in rec.syncs]
    rows: dict[str, list[tuple]] = {
        "CUPTI_ACTIVITY_KIND_KERNEL": [_kernel_row(k, gpid, s) for k in kernels],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            (a.start, a.end, a.driver, global_tid(rec.pid, a.thread_id), a.correlation_id, s(a.name), a.return_value, None)
            for a in (ApiRec(*x) for x in rec.apis)
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
            (y.start, y.end, ctx_dev.get(y.context_id, 0), y.context_id, y.stream_id, y.correlation_id, gpid,
             y.sync_type, y.event_id, y.event_sync_id) for y in syncs
        ],
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT": [
            (e.timestamp, e.device_id, e.context_id, e.stream_id, e.correlation_id, gpid, e.event_id, e.event_sync_id)
            for e in (EventRec(*x) for x in rec.events)
        ],
        "CUPTI_ACTIVITY_KIND_MEMCPY": [(*m[:6], gpid, *m[6:]) for m in rec.memcpys],
        "CUPTI_ACTIVITY_KIND_MEMSET": [(*m[:6], gpid, *m[6:]) for m in rec.memsets],
        "NVTX_EVENTS": nvtx_rows(rec),
    }
    streams = {(st.context_id, st.stream_id): (st.stream_id, 0, 0, rec.pid, st.context_id, st.priority, st.flag)
               for st in (StreamRec(*x) for x in rec.streams)}
    for k in kernels:
        streams.setdefault((k.context_id, k.stream_id), (k.stream_id, 0, 0, rec.pid, k.context_id, 0, 0))
    rows["TARGET_INFO_CUDA_STREAM"] = list(streams.values())
    if rec.memory:
        rows.update(memory_rows(rec, s))
    return rows, s


def _opt(s: Interner, text: str | None) -> int | None:
    return None if text is None else s(text)


def memory_rows(rec: TraceRecords, s: Interner) -> dict[str, list[tuple]]:
    """The TRACER_* tables; strings are interned here, once, at write time."""
    pid = rec.pid
    return {
        "TRACER_OPS": [(o.id, o.kind, s(o.name), global_tid(pid, o.thread_id), o.start, o.end, o.seq_nr, o.bwd_seq_nr,
                        o.correlation_id, _opt(s, o.callsite)) for o in (OpRec(*x) for x in rec.ops)],
        "TRACER_EXTERNAL_CORRELATION": sorted({(int(c), int(e)) for c, e in rec.ext_correlations}),
        "TRACER_MEMORY_ACCESS": [(a.op_id, a.address, a.bytes, a.mode, a.exact, a.allocation_id, _opt(s, a.label))
                                 for a in (AccessRec(*x) for x in rec.accesses)],
        "TRACER_ALLOCATIONS": [(a.id, a.device_id, a.address, a.bytes, a.stream_id, a.start, a.end, a.source,
                                _opt(s, a.label)) for a in (AllocationRec(*x) for x in rec.allocations)],
        "TRACER_HOST_QUERIES": [(q.correlation_id, q.kind, q.record_correlation_id, q.stream_id, q.start, q.end,
                                 global_tid(pid, q.thread_id)) for q in (HostQueryRec(*x) for x in rec.host_queries)],
        "TRACER_LAUNCH_UNKNOWN": [(u.correlation_id, s(u.name), u.reason)
                                  for u in (LaunchUnknownRec(*x) for x in rec.launch_unknown)],
    }


def write_sqlite(rec: TraceRecords, out: Path, *, target_exit: int | None = None, producer: str = "cupti") -> None:
    """Write to a temp name and rename, so a crash never leaves a half-written trace."""
    rows, strings = table_rows(rec)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(strings.items)))
        for table, cols in TABLES.items():
            if rows[table] or table == "CUPTI_ACTIVITY_KIND_KERNEL":
                _create(con, table, cols, rows[table])
        for table, cols in (MEMORY_TABLES.items() if rec.memory else ()):
            _create(con, table, cols, rows[table])  # all of them, even empty: their presence says memory was recorded
        con.execute("CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT)")
        con.executemany("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (?, ?, ?)", SYNC_TYPES)
        meta = [("EXPORT_PRODUCT_NAME", "tracer"), ("EXPORT_PRODUCT_VERSION", __version__),
                ("EXPORT_SCHEMA_VERSION", SCHEMA_FOLLOWED), ("TRACER_PRODUCER", producer)]
        if target_exit is not None:
            meta.append(("TRACER_TARGET_EXIT", str(target_exit)))
        meta += [(f"TRACER_RECORD_ERRORS_{kind}", f"{n} records lost: {first}") for kind, (n, first) in rec.errors.items()]
        if rec.memory:
            meta.append(("TRACER_MEMORY", "1"))
        meta += sorted(rec.meta.items())
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
        con.commit()
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    tmp.replace(out)


def _create(con: sqlite3.Connection, table: str, cols: str, rows: list[tuple]) -> None:
    con.execute(f"CREATE TABLE {table} ({cols})")
    marks = ", ".join("?" * len(cols.split(", ")))
    con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
