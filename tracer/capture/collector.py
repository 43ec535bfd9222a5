"""CUPTI activity records -> NamedTuples (records.py), as buffers complete; the records die with
their buffer, so nothing of CUPTI's is kept."""
from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from tracer.capture.fastrecords import FastRecords
from tracer.capture.records import (ApiRec, EventRec, ExtCorrRec, KernelRec, MarkerRec, Memory2Rec, MemcpyRec, MemsetRec,
                                    StreamRec, SyncRec, TraceRecords, count_error)

# CUPTI hands a buffer over when it is full and all its records are complete, or at a flush. The
# periodic flush (flag 0, the mode CUPTI documents for a flushing thread) takes only buffers whose
# records are all complete, and holds back one with a record still in progress (a kernel queued or
# running). A forced flush (flag 1) takes every buffer, but hands unfinished records over without
# their end times and never delivers them again: so it runs only at exit and right after the
# program synchronised the device (Session.flush_at_sync). Small buffers: what a process killed
# between flushes loses is bounded by its last buffers (was 8 MB: a whole small job's records).
BUFFER_BYTES = 1 << 20
EXTERNAL_KIND = "CUSTOM0"  # the external correlation kind tracer pushes around ops
# API calls that enqueue no work and order nothing (getters, error peeks, capture-state checks): left
# out of the API activity records unless every call is asked for (CaptureOptions.apis == "all").
GETTER = re.compile(r"^cu(?:da)?[A-Za-z0-9]*?(?:Get|Is|Peek)(?:[A-Z_0-9]|$)")


class Collector:
    """Turns activity records into tuples. `memory` adds EXTERNAL_CORRELATION and MEMORY2."""

    def __init__(self, cupti: Any, *, memory: bool = False, apis: str = "filtered", hook: list[float] | None = None) -> None:
        self.cupti = cupti
        self.apis = apis
        self.hook = hook if hook is not None else [0, 0.0]  # [buffers, seconds] converting records (Timing)
        self.rec = TraceRecords(pid=os.getpid(), memory=memory)
        self.memory2: list[Memory2Rec] = []
        self.lock = threading.RLock()  # a SIGTERM flush may interrupt a buffer being read
        self.names: dict[tuple[int, int], str] = {}
        self.min_ts = 0  # a fork child drops what its parent left in CUPTI's buffers
        K = cupti.ActivityKind
        self.handlers = {
            int(K.CONCURRENT_KERNEL): self._kernel, int(K.RUNTIME): self._api, int(K.DRIVER): self._api,
            int(K.SYNCHRONIZATION): self._sync, int(K.CUDA_EVENT): self._event, int(K.STREAM): self._stream,
            int(K.MEMCPY): self._memcpy, int(K.MEMSET): self._memset, int(K.MARKER): self._marker,
        }
        if memory:
            self.handlers[int(K.EXTERNAL_CORRELATION)] = self._external
            self.handlers[int(K.MEMORY2)] = self._memory2
            self.external_kind = int(getattr(cupti.ExternalCorrelationKind, EXTERNAL_KIND))
        self.driver_kind = int(K.DRIVER)
        self.fast = FastRecords(cupti, self._slow_reads)

    def _slow_reads(self, where: str, exc: BaseException) -> None:
        """A record type read through cupti-python's attributes (slower, the same values): said in the metadata."""
        self.rec.meta[f"TRACER_{where.upper()}"] = f"attribute reads: {type(exc).__name__}: {exc}"[:300]

    def kinds(self) -> list[int]:
        return list(self.handlers)

    def reset(self, pid: int, min_ts: int) -> None:
        """After fork: the child's own records only."""
        with_memory = self.rec.memory
        self.rec = TraceRecords(pid=pid, memory=with_memory)
        self.memory2 = []
        self.lock = threading.RLock()  # a SIGTERM flush may interrupt a buffer being read
        self.min_ts = min_ts

    def take(self) -> TraceRecords:
        """The streamed records converted since the last take (for the trace file)."""
        with self.lock:
            return self.rec.take()

    def buffer_completed(self, activities: list[Any]) -> None:
        """CUPTI swallows exceptions raised here (and the rest of the buffer with them), so each
        record is handled on its own and failures are counted into the trace's metadata."""
        t0 = time.perf_counter()
        handlers = self.handlers
        with self.lock:
            for a in activities:
                handler = handlers.get(a.kind)
                if handler is None:
                    continue
                try:
                    handler(a)
                except Exception as exc:  # counted and reported, never silently dropped
                    count_error(self.rec.errors, type(a).__name__, exc)
        self.hook[0] += 1
        self.hook[1] += time.perf_counter() - t0

    def _kernel(self, a: Any) -> None:
        v = self.fast.read(a, KERNEL_FIELDS, _kernel_slow)
        if v[0] >= self.min_ts:
            self.rec.kernels.append(KernelRec(*v))

    def _api_name(self, driver: bool, cbid: int) -> str:
        key = (int(driver), cbid)
        name = self.names.get(key)
        if name is None:
            dom = self.cupti.CallbackDomain.DRIVER_API if driver else self.cupti.CallbackDomain.RUNTIME_API
            try:
                name = str(self.cupti.get_callback_name(dom, cbid))
            except Exception:  # an id this CUPTI cannot name is still a call
                name = f"{'cu' if driver else 'cuda'}Api_cbid{cbid}"
            self.names[key] = name
        return name

    def _api(self, a: Any) -> None:
        start, end, tid, corr, cbid, rv, kind = self.fast.read(a, API_FIELDS, _api_slow)
        if start < self.min_ts:
            return
        driver = kind == self.driver_kind
        self.rec.apis.append(ApiRec(start, end, int(driver), tid, corr, self._api_name(driver, cbid), rv))

    def _sync(self, a: Any) -> None:
        v = self.fast.read(a, SYNC_FIELDS, _sync_slow)
        if v[0] >= self.min_ts:
            self.rec.syncs.append(SyncRec(*v))

    def _event(self, a: Any) -> None:
        self.rec.events.append(EventRec(getattr(a, "device_timestamp", 0) or 0, getattr(a, "device_id", 0), a.context_id,
                                        a.stream_id, a.correlation_id, a.event_id, getattr(a, "cuda_event_sync_id", 0)))

    def _stream(self, a: Any) -> None:
        self.rec.streams.append(StreamRec(a.context_id, a.stream_id, a.priority, int(a.flag), a.correlation_id))

    def _memcpy(self, a: Any) -> None:
        v = self.fast.read(a, MEMCPY_FIELDS, _memcpy_slow)
        if v[0] >= self.min_ts:
            self.rec.memcpys.append(MemcpyRec(*v))

    def _memset(self, a: Any) -> None:
        v = self.fast.read(a, MEMSET_FIELDS, _memset_slow)
        if v[0] >= self.min_ts:
            self.rec.memsets.append(MemsetRec(*v))

    def _marker(self, a: Any) -> None:
        if a.timestamp < self.min_ts:
            return
        obj = a.object_id
        tid = obj.pt.thread_id if int(a.object_kind) == int(self.cupti.ActivityObjectKind.THREAD) else 0
        self.rec.markers.append(MarkerRec(int(a.flags_), a.timestamp, a.id, tid, a.name or "", a.domain or ""))

    def _external(self, a: Any) -> None:
        kind, corr, external = self.fast.read(a, EXTERNAL_FIELDS, _external_slow)
        if kind == self.external_kind:
            self.rec.ext_correlations.append(ExtCorrRec(corr, external))

    def _memory2(self, a: Any) -> None:
        v = self.fast.read(a, MEMORY2_FIELDS, _memory2_slow)
        if v[6] >= self.min_ts:
            self.memory2.append(Memory2Rec(*v))


# The fields each record type is read with (fastrecords.py), in the order of its tuple; the slow
# readers (cupti-python's attributes) give the same values, and check the fast ones once per type.
KERNEL_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "name", "grid_x", "grid_y",
                 "grid_z", "block_x", "block_y", "block_z", "registers_per_thread", "static_shared_memory",
                 "dynamic_shared_memory", "graph_id", "graph_node_id")
API_FIELDS = ("start", "end", "thread_id", "correlation_id", "cbid", "return_value", "kind")
SYNC_FIELDS = ("start", "end", "context_id", "stream_id", "correlation_id", "type", "cuda_event_id", "cuda_event_sync_id")
MEMCPY_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "copy_kind", "src_kind",
                 "dst_kind", "graph_node_id")
MEMSET_FIELDS = ("start", "end", "device_id", "context_id", "stream_id", "correlation_id", "value", "bytes", "graph_node_id")
EXTERNAL_FIELDS = ("external_kind", "correlation_id", "external_id")
MEMORY2_FIELDS = ("memory_operation_type", "address", "bytes", "device_id", "stream_id", "memory_kind", "timestamp",
                  "correlation_id", "name")


def _node(a: Any) -> int:
    return int(getattr(a, "graph_node_id", 0) or 0)


def _kernel_slow(a: Any) -> tuple:
    return (a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id, a.name, a.grid_x, a.grid_y, a.grid_z,
            a.block_x, a.block_y, a.block_z, a.registers_per_thread, a.static_shared_memory, a.dynamic_shared_memory,
            getattr(a, "graph_id", 0), getattr(a, "graph_node_id", 0))


def _api_slow(a: Any) -> tuple:
    return a.start, a.end, a.thread_id, a.correlation_id, a.cbid, getattr(a, "return_value", 0), int(a.kind)


def _sync_slow(a: Any) -> tuple:
    return (a.start, a.end, a.context_id, a.stream_id, a.correlation_id, int(a.type), a.cuda_event_id,
            getattr(a, "cuda_event_sync_id", 0))


def _memcpy_slow(a: Any) -> tuple:
    return (a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id, a.bytes, int(a.copy_kind),
            int(a.src_kind), int(a.dst_kind), _node(a))


def _memset_slow(a: Any) -> tuple:
    return a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id, a.value, a.bytes, _node(a)


def _external_slow(a: Any) -> tuple:
    return int(a.external_kind), a.correlation_id, a.external_id


def _memory2_slow(a: Any) -> tuple:
    return (int(a.memory_operation_type), a.address, a.bytes, a.device_id, a.stream_id, int(a.memory_kind), a.timestamp,
            a.correlation_id, a.name or "")


def start(collector: Collector) -> None:
    cupti = collector.cupti
    cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)
    cupti.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), collector.buffer_completed)
    for kind in collector.kinds():
        try:
            cupti.activity_enable(kind)
        except Exception as exc:  # a kind this CUPTI or device lacks: the rest still records
            count_error(collector.rec.errors, f"enable_{kind}", exc)
    cupti.activity_enable_all_sync_records(1)
    collector.rec.meta["TRACER_API_RECORDS"] = leave_out_getters(collector) if collector.apis == "filtered" else "all"


def leave_out_getters(collector: Collector) -> str:
    """Switch the getters' API records off (after their kinds are on: enabling a kind again would
    switch every API back on); says what was done, for the trace's metadata."""
    from tracer.capture.callbacks import api_name

    cupti, left_out, failed = collector.cupti, 0, ""
    for enum_cls, switch in ((cupti.driver_api_trace_cbid, "activity_enable_driver_api"),
                             (cupti.runtime_api_trace_cbid, "activity_enable_runtime_api")):
        for member in getattr(enum_cls, "__members__", {}):
            if not GETTER.match(api_name(member)):
                continue
            try:
                getattr(cupti, switch)(int(getattr(enum_cls, member)), 0)
                left_out += 1
            except Exception as exc:  # an older CUPTI: every call keeps its record
                failed = failed or f"{type(exc).__name__}: {exc}"[:200]
    return f"getters left out ({left_out} APIs)" + (f"; some could not be: {failed}" if failed else "")


def stop(collector: Collector) -> None:
    cupti = collector.cupti
    cupti.activity_flush_all(1)
    for kind in collector.kinds():
        try:
            cupti.activity_disable(kind)
        except Exception as exc:
            count_error(collector.rec.errors, f"disable_{kind}", exc)
