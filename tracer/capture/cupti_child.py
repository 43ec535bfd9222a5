"""Runs inside the traced process: CUPTI activity tracing through cupti-python around a Python
target run with runpy, then the records written as SQLite in the nsys export schema.

Usage (tracer starts it; NVTX_INJECTION64_PATH must already point at libcupti):
    python -m tracer.capture.cupti_child OUT.sqlite -- [-m MODULE | SCRIPT | -c CODE] ARGS...
"""
from __future__ import annotations

import os
import runpy
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from tracer.capture.nsys_schema import TraceRecords, write_sqlite

BUFFER_BYTES = 32 << 20


class Collector:
    """Turns activity records into plain tuples as buffers complete (records die with the buffer)."""

    def __init__(self, cupti: Any) -> None:
        self.cupti = cupti
        self.rec = TraceRecords(pid=os.getpid())
        self.lock = threading.Lock()
        self.names: dict[tuple[int, int], str] = {}
        K = cupti.ActivityKind
        self.handlers = {
            int(K.CONCURRENT_KERNEL): self._kernel, int(K.RUNTIME): self._api, int(K.DRIVER): self._api,
            int(K.SYNCHRONIZATION): self._sync, int(K.CUDA_EVENT): self._event, int(K.STREAM): self._stream,
            int(K.MEMCPY): self._memcpy, int(K.MEMSET): self._memset, int(K.MARKER): self._marker,
        }
        self.driver_kind = int(K.DRIVER)

    def kinds(self) -> list[int]:
        return list(self.handlers)

    def buffer_completed(self, activities: list[Any]) -> None:
        """CUPTI swallows exceptions raised here (and the rest of the buffer with them), so each
        record is handled on its own and failures are counted into the trace's metadata."""
        with self.lock:
            for a in activities:
                handler = self.handlers.get(int(a.kind))
                if handler is None:
                    continue
                try:
                    handler(a)
                except Exception as exc:  # counted and reported, never silently dropped
                    name = type(a).__name__
                    count, first = self.rec.errors.get(name, (0, f"{type(exc).__name__}: {exc}"))
                    self.rec.errors[name] = (count + 1, first)

    def _kernel(self, a: Any) -> None:
        self.rec.kernels.append((
            a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id, a.name,
            a.grid_x, a.grid_y, a.grid_z, a.block_x, a.block_y, a.block_z, a.registers_per_thread,
            a.static_shared_memory, a.dynamic_shared_memory, getattr(a, "graph_id", 0), getattr(a, "graph_node_id", 0),
        ))

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
        driver = int(a.kind) == self.driver_kind
        self.rec.apis.append((a.start, a.end, int(driver), a.thread_id, a.correlation_id,
                              self._api_name(driver, a.cbid), getattr(a, "return_value", 0)))

    def _sync(self, a: Any) -> None:
        self.rec.syncs.append((a.start, a.end, a.context_id, a.stream_id, a.correlation_id, int(a.type),
                               a.cuda_event_id, getattr(a, "cuda_event_sync_id", 0)))

    def _event(self, a: Any) -> None:
        self.rec.events.append((getattr(a, "device_timestamp", 0) or 0, getattr(a, "device_id", 0), a.context_id,
                                a.stream_id, a.correlation_id, a.event_id, getattr(a, "cuda_event_sync_id", 0)))

    def _stream(self, a: Any) -> None:
        self.rec.streams.append((a.context_id, a.stream_id, a.priority, int(a.flag), a.correlation_id))

    def _memcpy(self, a: Any) -> None:
        self.rec.memcpys.append((a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id,
                                 a.bytes, int(a.copy_kind), int(a.src_kind), int(a.dst_kind)))

    def _memset(self, a: Any) -> None:
        self.rec.memsets.append((a.start, a.end, a.device_id, a.context_id, a.stream_id, a.correlation_id,
                                 a.value, a.bytes))

    def _marker(self, a: Any) -> None:
        obj = a.object_id
        tid = obj.pt.thread_id if int(a.object_kind) == int(self.cupti.ActivityObjectKind.THREAD) else 0
        self.rec.markers.append((int(a.flags_), a.timestamp, a.id, tid, a.name or "", a.domain or ""))


def start(collector: Collector) -> None:
    cupti = collector.cupti
    cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)
    cupti.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), collector.buffer_completed)
    for kind in collector.kinds():
        cupti.activity_enable(kind)
    cupti.activity_enable_all_sync_records(1)


def stop(collector: Collector) -> None:
    cupti = collector.cupti
    cupti.activity_flush_all(1)
    for kind in collector.kinds():
        cupti.activity_disable(kind)


def run_target(target: list[str]) -> int:
    """Run a Python command line in this process, keeping its argv; returns its exit code."""
    try:
        if target[0] == "-m":
            sys.argv = target[1:]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        elif target[0] == "-c":
            sys.argv = ["-c", *target[2:]]
            exec(compile(target[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(target)
            sys.path.insert(0, str(Path(target[0]).resolve().parent))
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # the target's crash is reported, and its exit code kept non-zero
        traceback.print_exc()
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tracer.capture.cupti_child OUT.sqlite -- TARGET...", file=sys.stderr)
        return 2
    out, target = Path(argv[0]), argv[2:]
    from cupti import cupti

    collector = Collector(cupti)
    start(collector)
    code = run_target(target)
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:  # a dead context must not lose the trace of what ran
        pass
    stop(collector)
    write_sqlite(collector.rec, out, target_exit=code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
