"""Writes activity records as SQLite in the Nsight Systems export schema (same table and column
names), so one reader serves nsys exports and tracer's own CUPTI captures.

A traced process writes its trace as records arrive (TraceWriter: one committed transaction per
batch, the file closed between batches so that no connection crosses a fork) into
`<stem>.partial.sqlite`, so a process that dies leaves every batch written before its death
readable, marked TRACER_PARTIAL; closing completes the file (ranges still open, memory tables,
metadata) and renames it to its final name. Records CUPTI hands over unfinished (a forced flush at
SIGTERM returns kernels still running, with no end time) and values SQLite cannot store are left
out, counted in META_DATA_EXPORT (`TRACER_LEFT_OUT_<table>`): one bad record never costs the trace."""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracer import __version__
from tracer.capture.demangle import demangle, short_name
from tracer.capture.records import (AccessRec, AllocationRec, ApiRec, EventRec, GraphNodeRec, HostQueryRec, KernelRec,
                                    LaunchUnknownRec, OpRec, StreamRec, SyncRec, TraceRecords)
from tracer.interner import Interner
from tracer.store.sqlite_open import Mode, open_sqlite
from tracer.format.memory_tables import FLAG, MEMORY_TABLES  # the contract: docs/design/capture-memory-jobs.md
from tracer.format.procs import PARTIAL_META, partial_path

__all__ = ["MEMORY_TABLES", "TABLES", "TraceRecords", "TraceWriter", "global_tid", "partial_path", "salvage", "write_sqlite"]

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
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER, "
    "graphNodeId INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER, contextId INTEGER, "
    "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER, graphNodeId INTEGER",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER",
    "TARGET_INFO_CUDA_STREAM": "streamId INTEGER NOT NULL, hwId INTEGER, vmId INTEGER, processId INTEGER, "
    "contextId INTEGER, priority INTEGER, flag INTEGER",
}


def global_tid(pid: int, tid: int) -> int:
    """nsys's layout: (hw << 56) | (vm << 48) | (pid << 24) | tid."""
    return (pid << 24) | (tid & 0xFFFFFF)


PARTIAL_NOTE = "the process did not finish its trace: records up to its last flush"
INT64 = 1 << 63  # SQLite integers are signed 64-bit
# Tables whose rows begin with (start, end): a row is kept only when 0 < start <= end (a record
# still in progress when CUPTI handed it over has a zero or missing end).
KERNELS, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
UNFINISHED_META, MAX_UNFINISHED = "TRACER_UNFINISHED", 64  # JSON list of records still running when handed over
TIMED = (KERNELS, RUNTIME, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def _fits(row: tuple) -> bool:
    return all(-INT64 <= v < INT64 for v in row if isinstance(v, int))


class _Ranges:
    """NVTX START/END markers paired by id across batches (an END may arrive before its START)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.domains: dict[str, int] = {}
        self.starts: dict[int, tuple] = {}  # id -> (ts, tid, name, domain id)
        self.ends: dict[int, tuple[int, int]] = {}  # id -> (ts, tid) of an END seen first

    def rows(self, markers: list) -> list[tuple]:
        """Closed ranges, marks and new domains of this batch."""
        pid, out = self.pid, list[tuple[Any, ...]]()
        for flags, ts, mid, tid, name, domain in sorted(markers, key=lambda m: m[1]):
            dom = 0
            if domain:
                if domain not in self.domains:
                    self.domains[domain] = len(self.domains) + 1
                    out.append((0, None, DOMAIN_CREATE, None, None, None, domain, None, None, None, self.domains[domain]))
                dom = self.domains[domain]
            if flags & 2:
                self.starts[mid] = (ts, tid, name, dom)
            if flags & 4:
                self.ends[mid] = (ts, tid)
            if flags & 1 and not flags & 6:
                out.append((ts, None, MARK, None, None, None, name, global_tid(pid, tid), None, None, dom))
            if mid in self.starts and mid in self.ends:
                (t0, tid0, text, dom0), (t1, tid1) = self.starts.pop(mid), self.ends.pop(mid)
                kind = PUSHPOP_RANGE if tid0 == tid1 else STARTEND_RANGE
                out.append((t0, t1, kind, None, None, None, text, global_tid(pid, tid0), global_tid(pid, tid1), None, dom0))
        return out

    def open_rows(self) -> list[tuple]:
        """Ranges started and not (yet) ended: end NULL."""
        return [(t0, None, PUSHPOP_RANGE, None, None, None, text, global_tid(self.pid, tid0), None, None, dom0)
                for t0, tid0, text, dom0 in self.starts.values()]


class TraceWriter:
    """One trace file, written batch by batch (`append`) and completed by `close`. `durable`: a
    rollback journal, so a batch is all there or not at all when the process dies mid-write (a
    traced process); otherwise no journal (a one-shot write of records already complete)."""

    def __init__(self, final: Path, pid: int, producer: str, *, durable: bool = True) -> None:
        self.final, self.tmp, self.pid, self.durable = final, partial_path(final), pid, durable
        for p in (self.tmp, Path(f"{self.tmp}-journal")):
            p.unlink(missing_ok=True)
        self.strings, self.written_strings = Interner(), 0
        self.names: dict[str, tuple[int, int, int]] = {}  # mangled kernel name -> (demangled, short, mangled) ids
        self.ranges = _Ranges(pid)
        self.streams: dict[tuple[int, int], bool] = {}  # (context, stream) -> row came from a stream record
        self.ctx_dev: dict[int, int] = {}
        self.unknown_sync_ctx: set[int] = set()
        self.left_out: dict[str, tuple[int, str]] = {}  # table -> (rows left out, why and the first one)
        self.unfinished: list[dict[str, object]] = []  # kernels and API calls still running when handed over
        self.kernels = 0
        with self._open() as con:
            con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
            for table, cols in TABLES.items():
                con.execute(f"CREATE TABLE {table} ({cols})")
            con.execute("CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT)")
            con.executemany("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (?, ?, ?)", SYNC_TYPES)
            con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
            con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
                ("EXPORT_PRODUCT_NAME", "tracer"), ("EXPORT_PRODUCT_VERSION", __version__),
                ("EXPORT_SCHEMA_VERSION", SCHEMA_FOLLOWED), ("TRACER_PRODUCER", producer), (PARTIAL_META, PARTIAL_NOTE)])

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction, closed after it (committed, or rolled back on error)."""
        con = open_sqlite(self.tmp, Mode.CREATE, timeout=5.0)
        try:
            # The journal makes a batch all-or-nothing for a process killed mid-write; no fsync:
            # the OS keeps what a dead process wrote (only a machine crash could lose it).
            con.execute(f"PRAGMA journal_mode={'DELETE' if self.durable else 'MEMORY'}")
            con.execute("PRAGMA synchronous=OFF")
            with con:
                con.execute("BEGIN")  # one transaction per batch (savepoints inside: _insert)
                yield con
        finally:
            con.close()

    def _kernel_row(self, k: KernelRec, gpid: int) -> tuple:
        ids = self.names.get(k.name)
        if ids is None:
            full = demangle(k.name)
            ids = self.names[k.name] = (self.strings(full), self.strings(short_name(full)), self.strings(k.name))
        return (k.start, k.end, k.device_id, k.context_id, k.stream_id, k.correlation_id, gpid, *ids, k.grid_x, k.grid_y,
                k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread, k.static_shared_memory,
                k.dynamic_shared_memory, k.graph_id, k.graph_node_id)

    def _rows(self, con: sqlite3.Connection, rec: TraceRecords) -> dict[str, list[tuple]]:
        s, pid, gpid = self.strings, self.pid, self.pid << 24
        kernels = [KernelRec(*k) for k in rec.kernels]
        for k in kernels:
            self.ctx_dev.setdefault(k.context_id, k.device_id)
        syncs = [SyncRec(*y) for y in rec.syncs]
        self.unknown_sync_ctx |= {y.context_id for y in syncs if y.context_id not in self.ctx_dev}
        return {
            "CUPTI_ACTIVITY_KIND_KERNEL": [self._kernel_row(k, gpid) for k in kernels],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [
                (a.start, a.end, a.driver, global_tid(pid, a.thread_id), a.correlation_id, s(a.name), a.return_value, None)
                for a in (ApiRec(*x) for x in rec.apis)],
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": [
                (y.start, y.end, self.ctx_dev.get(y.context_id, 0), y.context_id, y.stream_id, y.correlation_id, gpid,
                 y.sync_type, y.event_id, y.event_sync_id) for y in syncs],
            "CUPTI_ACTIVITY_KIND_CUDA_EVENT": [
                (e.timestamp, e.device_id, e.context_id, e.stream_id, e.correlation_id, gpid, e.event_id, e.event_sync_id)
                for e in (EventRec(*x) for x in rec.events)],
            "CUPTI_ACTIVITY_KIND_MEMCPY": [(*m[:6], gpid, *m[6:]) for m in rec.memcpys],
            "CUPTI_ACTIVITY_KIND_MEMSET": [(*m[:6], gpid, *m[6:]) for m in rec.memsets],
            "NVTX_EVENTS": self.ranges.rows(rec.markers),
            "TARGET_INFO_CUDA_STREAM": self._stream_rows(con, rec, kernels),
        }

    def _stream_rows(self, con: sqlite3.Connection, rec: TraceRecords, kernels: list[KernelRec]) -> list[tuple]:
        """New streams; a stream record arriving after a kernel made its row replaces that row."""
        rows = []
        for st in (StreamRec(*x) for x in rec.streams):
            key = (st.context_id, st.stream_id)
            if self.streams.get(key) is False:
                con.execute("DELETE FROM TARGET_INFO_CUDA_STREAM WHERE contextId = ? AND streamId = ?", key)
            if not self.streams.get(key):
                self.streams[key] = True
                rows.append((st.stream_id, 0, 0, self.pid, st.context_id, st.priority, st.flag))
        for k in kernels:
            if (k.context_id, k.stream_id) not in self.streams:
                self.streams[(k.context_id, k.stream_id)] = False
                rows.append((k.stream_id, 0, 0, self.pid, k.context_id, 0, 0))
        return rows

    def append(self, rec: TraceRecords) -> None:
        """Write a batch of streamed records in one transaction."""
        with self._open() as con:
            self._append(con, rec)

    def _append(self, con: sqlite3.Connection, rec: TraceRecords) -> None:
        for table, rows in self._rows(con, rec).items():
            if table in TIMED:
                rows = self._finished(table, rows)
            if rows:
                inserted = self._insert(con, table, TABLES[table], rows)
                self.kernels += inserted if table == KERNELS else 0
        con.execute("DELETE FROM NVTX_EVENTS WHERE end IS NULL AND eventType = ?", (PUSHPOP_RANGE,))
        self._insert(con, "NVTX_EVENTS", TABLES["NVTX_EVENTS"], self.ranges.open_rows())
        self._new_strings(con)
        if self.unfinished:
            con.execute("DELETE FROM META_DATA_EXPORT WHERE name = ?", (UNFINISHED_META,))
            con.execute("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", (UNFINISHED_META, json.dumps(self.unfinished)))
        if self.left_out:
            con.execute("DELETE FROM META_DATA_EXPORT WHERE substr(name, 1, 16) = 'TRACER_LEFT_OUT_'")
            con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", [
                (f"TRACER_LEFT_OUT_{table}", f"{n} records left out: {why}") for table, (n, why) in self.left_out.items()])

    def _finished(self, table: str, rows: list[tuple]) -> list[tuple]:
        """Rows of records that had finished when CUPTI handed them over."""
        kept = [r for r in rows if 0 < r[0] <= r[1] < INT64]
        if len(kept) < len(rows) and table in (KERNELS, RUNTIME):
            self._note_unfinished(table, [r for r in rows if not 0 < r[0] <= r[1] < INT64])
        if len(kept) < len(rows):
            bad = next(r for r in rows if not 0 < r[0] <= r[1] < INT64)
            first = self.strings.items[bad[8]] if table == KERNELS else f"correlation id {bad[5 if table != RUNTIME else 4]}"
            self._left(table, len(rows) - len(kept), f"still running or without timestamps when handed over "
                                                     f"(start {bad[0]}, end {bad[1]}: {first})")
        return kept

    def _note_unfinished(self, table: str, rows: list[tuple]) -> None:
        """Kernels (stream, name; start 0: queued, not started) and API calls (thread, name) not
        ended when a forced flush handed them over (a process stopped in a hang): what each was doing."""
        for r in rows[:max(0, MAX_UNFINISHED - len(self.unfinished))]:
            if table == KERNELS:
                self.unfinished.append({"kind": "kernel", "start": r[0], "device": r[2], "stream": r[4],
                                        "name": self.strings.items[r[8]]})
            else:
                self.unfinished.append({"kind": "api", "start": r[0], "tid": r[3], "name": self.strings.items[r[5]]})

    def _left(self, table: str, n: int, why: str) -> None:
        count, first = self.left_out.get(table, (0, why))
        self.left_out[table] = (count + n, first)

    def _insert(self, con: sqlite3.Connection, table: str, cols: str, rows: list[tuple]) -> int:
        """Insert rows; a batch holding an integer SQLite cannot store (beyond 64 bits) is
        inserted again without those rows. Returns the rows inserted."""
        sql = f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols.split(', ')))})"
        con.execute("SAVEPOINT rows")
        try:
            con.executemany(sql, rows)
        except OverflowError:
            con.execute("ROLLBACK TO rows")
            fits = [r for r in rows if _fits(r)]
            bad = next(r for r in rows if not _fits(r))
            self._left(table, len(rows) - len(fits), f"values beyond 64-bit integers (first: {bad})"[:300])
            con.executemany(sql, fits)
            rows = fits
        con.execute("RELEASE rows")
        return len(rows)

    def _new_strings(self, con: sqlite3.Connection) -> None:
        items = self.strings.items
        if len(items) > self.written_strings:
            con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, items[i]) for i in range(self.written_strings, len(items))])
            self.written_strings = len(items)

    def close(self, rec: TraceRecords, *, target_exit: int | None = None) -> Path:
        """Write the last batch, the memory tables and the metadata in one transaction; rename
        the file to its final name."""
        try:
            with self._open() as con:
                self._append(con, rec)
                for ctx in self.unknown_sync_ctx & self.ctx_dev.keys():
                    con.execute("UPDATE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION SET deviceId = ? WHERE contextId = ?",
                                (self.ctx_dev[ctx], ctx))
                if rec.memory:
                    for table, rows in memory_rows(rec, self.strings).items():
                        con.execute(f"CREATE TABLE {table} ({MEMORY_TABLES[table]})")  # all, even empty: memory was recorded
                        self._insert(con, table, MEMORY_TABLES[table], rows)
                self._new_strings(con)
                con.execute("DELETE FROM META_DATA_EXPORT WHERE name = ?", (PARTIAL_META,))
                con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", _meta(rec, target_exit))
        except BaseException:
            if not self.durable:  # a traced process's batches stay: `trace run` completes them (salvage)
                self.abandon()
            raise
        self.tmp.replace(self.final)
        return self.final

    def abandon(self) -> None:
        for p in (self.tmp, Path(f"{self.tmp}-journal")):
            p.unlink(missing_ok=True)


def _meta(rec: TraceRecords, target_exit: int | None) -> list[tuple[str, str]]:
    meta = [("TRACER_TARGET_EXIT", str(target_exit))] if target_exit is not None else []
    meta += [(f"TRACER_RECORD_ERRORS_{kind}", f"{n} records lost: {first}") for kind, (n, first) in rec.errors.items()]
    if rec.memory:
        meta.append((FLAG, "1"))
    return meta + sorted(rec.meta.items())


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
        "TRACER_GRAPH_NODES": [(g.node_id, g.correlation_id, g.original_node_id)
                               for g in (GraphNodeRec(*x) for x in rec.graph_nodes)],
        "TRACER_GRAPH_LAUNCHES": sorted(set(rec.graph_launches)),
        "TRACER_GRAPH_EDGES": sorted(set(rec.graph_edges)),
        "TRACER_MEMORY_WINDOWS": sorted(set(rec.memory_windows)),
    }


def write_sqlite(rec: TraceRecords, out: Path, *, target_exit: int | None = None, producer: str = "cupti") -> None:
    """Write records already complete at once (temp name, renamed when complete)."""
    writer = TraceWriter(out, rec.pid, producer, durable=False)
    writer.close(rec, target_exit=target_exit)


def salvage(partial: Path, final: Path, note: str) -> int | None:
    """Complete what a dead process left in `<stem>.partial.sqlite` (a batch it died writing is
    rolled back by SQLite on opening): META TRACER_PARTIAL says why, and the file takes its final
    name; returns its kernels, or None (the file removed) when it died before its first commit.
    Run by `trace run` after the process is gone, never by a traced process."""
    con = open_sqlite(partial, Mode.WRITE, timeout=5.0)
    try:
        with con:
            con.execute("DELETE FROM META_DATA_EXPORT WHERE name = ?", (PARTIAL_META,))
            con.execute("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", (PARTIAL_META, note))
        kernels = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    except sqlite3.DatabaseError:  # no table committed yet: nothing was recorded
        kernels = None
    finally:
        con.close()
    if kernels is None:
        for p in (partial, Path(f"{partial}-journal")):
            p.unlink(missing_ok=True)
        return None
    partial.replace(final)
    return int(kernels)
