"""Writes activity records as SQLite in the Nsight Systems export schema (same table and column
names), so one reader serves nsys exports and tracer's own CUPTI captures."""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from tracer import __version__
from tracer.capture.demangle import demangle, short_name
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


def global_tid(pid: int, tid: int) -> int:
    """nsys's layout: (hw << 56) | (vm << 48) | (pid << 24) | tid."""
    return (pid << 24) | (tid & 0xFFFFFF)


@dataclass
class TraceRecords:
    """What a capture collected, as plain tuples (field order: see the Collector)."""

    pid: int
    kernels: list[tuple] = field(default_factory=list)
    apis: list[tuple] = field(default_factory=list)
    syncs: list[tuple] = field(default_factory=list)
    events: list[tuple] = field(default_factory=list)
    streams: list[tuple] = field(default_factory=list)
    memcpys: list[tuple] = field(default_factory=list)
    memsets: list[tuple] = field(default_factory=list)
    markers: list[tuple] = field(default_factory=list)  # (flags, timestamp, id, tid, name, domain)
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)  # record type -> (count, first error)


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


def table_rows(rec: TraceRecords) -> tuple[dict[str, list[tuple]], Interner]:
    s, gpid = Interner(), rec.pid << 24
    ctx_dev = {k[3]: k[2] for k in rec.kernels}
    rows: dict[str, list[tuple]] = {
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            (k[0], k[1], k[2], k[3], k[4], k[5], gpid, s(demangle(k[6])), s(short_name(demangle(k[6]))), s(k[6]),
             *k[7:16], k[16], k[17]) for k in rec.kernels
        ],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            (a[0], a[1], a[2], global_tid(rec.pid, a[3]), a[4], s(a[5]), a[6], None) for a in rec.apis
        ],
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
            (y[0], y[1], ctx_dev.get(y[2], 0), y[2], y[3], y[4], gpid, y[5], y[6], y[7]) for y in rec.syncs
        ],
        "CUPTI_ACTIVITY_KIND_CUDA_EVENT": [(e[0], e[1], e[2], e[3], e[4], gpid, e[5], e[6]) for e in rec.events],
        "CUPTI_ACTIVITY_KIND_MEMCPY": [(*m[:6], gpid, *m[6:]) for m in rec.memcpys],
        "CUPTI_ACTIVITY_KIND_MEMSET": [(*m[:6], gpid, *m[6:]) for m in rec.memsets],
        "NVTX_EVENTS": nvtx_rows(rec),
    }
    streams = {(st[0], st[1]): (st[1], 0, 0, rec.pid, st[0], st[2], st[3]) for st in rec.streams}
    for k in rec.kernels:
        streams.setdefault((k[3], k[4]), (k[4], 0, 0, rec.pid, k[3], 0, 0))
    rows["TARGET_INFO_CUDA_STREAM"] = list(streams.values())
    return rows, s


def write_sqlite(rec: TraceRecords, out: Path, *, target_exit: int | None = None, producer: str = "cupti") -> None:
    """Write to a temp name and rename, so a crash never leaves a half-written trace."""
    rows, strings = table_rows(rec)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(strings.items)))
        for table, cols in TABLES.items():
            if rows[table] or table == "CUPTI_ACTIVITY_KIND_KERNEL":
                con.execute(f"CREATE TABLE {table} ({cols})")
                marks = ", ".join("?" * len(cols.split(", ")))
                con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows[table])
        con.execute("CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT)")
        con.executemany("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (?, ?, ?)", SYNC_TYPES)
        meta = [("EXPORT_PRODUCT_NAME", "tracer"), ("EXPORT_PRODUCT_VERSION", __version__),
                ("EXPORT_SCHEMA_VERSION", SCHEMA_FOLLOWED), ("TRACER_PRODUCER", producer)]
        if target_exit is not None:
            meta.append(("TRACER_TARGET_EXIT", str(target_exit)))
        meta += [(f"TRACER_RECORD_ERRORS_{kind}", f"{n} records lost: {first}") for kind, (n, first) in rec.errors.items()]
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", meta)
        con.commit()
    finally:
        con.close()
    tmp.replace(out)
