"""What records a traced process: CUPTI (cupti-python), or the fake backend of the CPU tests
(same files and markers, no CUPTI: the clock is time.time_ns, external ids go nowhere).

A backend starts inactive: nothing of CUPTI is imported or enabled until `activate` (the session
calls it at the first CUDA use, or at once when the options say so). Until then its clock is
time.time_ns and push/pop do nothing: no CUDA work exists to be recorded yet."""
from __future__ import annotations

import itertools
import sys
import threading
import time
from functools import partial
from typing import Any

from tracer.capture.collector import Collector, count_error, start, stop
from tracer.capture.memory_recorder import MemoryRecorder
from tracer.capture.options import CaptureOptions
from tracer.capture.records import ApiRec, KernelRec, Memory2Rec, TraceRecords
from tracer.capture.timing import Timing


def _nothing(*_: Any) -> None:
    return None


class FakeBackend:
    name = "fake"

    def __init__(self, options: CaptureOptions, pid: int, timing: Timing) -> None:
        self.rec = TraceRecords(pid=pid, memory=options.memory)
        self.active = False
        self.clock = time.time_ns
        self.push, self.pop = _nothing, _nothing
        self.corr = itertools.count(1)
        self.lock = threading.Lock()
        self.flushes: list[bool] = []  # forced or not, as CUPTI would have been asked

    def activate(self, memory: MemoryRecorder | None) -> None:
        self.active = True

    def fake_kernel(self, name: str, stream: int = 7, duration_ns: int = 1000, *, running: bool = False) -> None:
        """A kernel and its launch record, as CUPTI would report them (test programs call this);
        `running`: as a forced flush hands over a kernel still running (no end time)."""
        now, corr = self.clock(), next(self.corr)
        with self.lock:
            self.rec.kernels.append(KernelRec(now, 0 if running else now + duration_ns, 0, 1, stream, corr, name, 1, 1, 1, 32,
                                              1, 1, 16, 0, 0, 0, 0))
            self.rec.apis.append(ApiRec(now - 500, now - 100, 0, threading.get_native_id(), corr, "cudaLaunchKernel", 0))

    @property
    def records(self) -> TraceRecords:
        return self.rec

    def flush(self, forced: bool = False) -> None:
        self.flushes.append(forced)

    def take(self) -> TraceRecords:
        with self.lock:
            return self.rec.take()

    def after_fork(self, pid: int, now: int) -> None:
        self.rec = TraceRecords(pid=pid, memory=self.rec.memory)
        self.lock = threading.Lock()

    def stop(self, *, forked: bool, quick: bool) -> tuple[TraceRecords, list[Memory2Rec]]:
        return self.rec, []


class CuptiBackend:
    name = "cupti"

    def __init__(self, options: CaptureOptions, pid: int, timing: Timing) -> None:
        self.options, self.timing, self.pid = options, timing, pid
        self.active = False
        self.clock: Any = time.time_ns
        self.push, self.pop = _nothing, _nothing
        self.cupti: Any = None
        self.collector: Collector | None = None
        self.callbacks: Any = None
        self.rec = TraceRecords(pid=pid, memory=options.memory)  # until activation: no records

    def activate(self, memory: MemoryRecorder | None) -> None:
        with self.timing.phase("cupti_import"):
            from cupti import cupti
        with self.timing.phase("cupti_start"):
            self.cupti = cupti
            self.collector = Collector(cupti, memory=self.options.memory, apis=self.options.apis,
                                       hook=self.timing.hook("record_conversion"))
            self.collector.rec.pid = self.pid
            start(self.collector)
            self.clock = cupti.get_timestamp
            kind = int(cupti.ExternalCorrelationKind.CUSTOM0)
            self.push = partial(cupti.activity_push_external_correlation_id, kind)
            self.pop = partial(cupti.activity_pop_external_correlation_id, kind)
            self.active = True
            if memory is not None:
                memory.bind(self.clock, self.push, self.pop)
                self._subscribe(memory)

    def _subscribe(self, memory: MemoryRecorder) -> None:
        roles = {"launch_args": ("launch",), "host_queries": ("record", "query")}
        wanted = tuple(r for part, rs in roles.items() if self.options.has(part) for r in rs)
        if not wanted:
            return
        from tracer.capture.callbacks import ApiCallbacks

        assert self.collector is not None
        try:
            self.callbacks = ApiCallbacks(self.cupti, memory, roles=wanted, hook=self.timing.hook("api_callbacks"))
            self.callbacks.subscribe()
        except Exception as exc:  # another CUPTI subscriber (a profiler) holds the callback API
            count_error(self.collector.rec.errors, "subscribe", exc)
            self.collector.rec.meta["TRACER_LAUNCH_ARGS"] = f"not recorded: {type(exc).__name__}: {exc}"[:300]
            self.callbacks = None

    @property
    def records(self) -> TraceRecords:
        return self.collector.rec if self.collector is not None else self.rec

    def flush(self, forced: bool = False) -> None:
        """The buffers whose records are all complete, delivered now (CUPTI's default flush: no
        device synchronisation); `forced`: every buffer, records still in progress cut (only
        when nothing is in flight: Session.flush_at_sync)."""
        if self.collector is not None:
            self.cupti.activity_flush_all(1 if forced else 0)

    def take(self) -> TraceRecords:
        return self.collector.take() if self.collector is not None else self.rec.take()

    def after_fork(self, pid: int, now: int) -> None:
        self.pid = pid
        if self.collector is not None:
            self.collector.reset(pid, now)
        self.rec = TraceRecords(pid=pid, memory=self.options.memory)

    def stop(self, *, forked: bool, quick: bool) -> tuple[TraceRecords, list[Memory2Rec]]:
        """Flush and detach, so CUPTI never calls into Python after this. A fork child flushes
        only when it initialised CUDA itself (its parent's CUPTI state is not its own otherwise);
        `quick` (SIGTERM) skips waiting for the device."""
        if self.collector is None:
            return self.rec, []
        rec = self.collector.rec
        if forked and not cuda_initialized():
            rec.meta["TRACER_FORK_CHILD"] = "CUDA not initialised in this fork child: nothing flushed"
            return rec, []
        if not quick:
            with self.timing.phase("exit_synchronize"):
                _synchronize()
        with self.timing.phase("exit_flush"):
            try:
                stop(self.collector)
            except Exception as exc:
                count_error(rec.errors, "flush", exc)
        if self.callbacks is not None:
            try:
                self.callbacks.unsubscribe()
            except Exception as exc:
                count_error(rec.errors, "unsubscribe", exc)
        return self.collector.rec, self.collector.memory2


def cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def _synchronize() -> None:
    if cuda_initialized():
        try:
            sys.modules["torch"].cuda.synchronize()
        except Exception:  # a dead context must not lose the trace of what ran
            pass


def make_backend(options: CaptureOptions, pid: int, timing: Timing) -> FakeBackend | CuptiBackend:
    return FakeBackend(options, pid, timing) if options.backend == "fake" else CuptiBackend(options, pid, timing)
