"""What records a traced process: CUPTI (cupti-python), or the fake backend of the CPU tests
(same files and markers, no CUPTI: the clock is time.time_ns, external ids go nowhere)."""
from __future__ import annotations

import sys
import time
from functools import partial
from typing import Any

from tracer.capture.collector import Collector, count_error, start, stop
from tracer.capture.memory import MemoryRecorder
from tracer.capture.options import CaptureOptions
from tracer.capture.records import Memory2Rec, TraceRecords


def _nothing(*_: Any) -> None:
    return None


class FakeBackend:
    name = "fake"

    def __init__(self, options: CaptureOptions, pid: int) -> None:
        self.rec = TraceRecords(pid=pid, memory=options.memory)
        self.clock = time.time_ns
        self.push, self.pop = _nothing, _nothing

    def start(self, memory: MemoryRecorder | None) -> None:
        return None

    def after_fork(self, pid: int, now: int) -> None:
        self.rec = TraceRecords(pid=pid, memory=self.rec.memory)

    def stop(self, *, forked: bool, quick: bool) -> tuple[TraceRecords, list[Memory2Rec]]:
        return self.rec, []


class CuptiBackend:
    name = "cupti"

    def __init__(self, options: CaptureOptions, pid: int) -> None:
        from cupti import cupti

        self.cupti = cupti
        self.collector = Collector(cupti, memory=options.memory)
        self.collector.rec.pid = pid
        self.clock = cupti.get_timestamp
        kind = int(cupti.ExternalCorrelationKind.CUSTOM0)
        self.push = partial(cupti.activity_push_external_correlation_id, kind)
        self.pop = partial(cupti.activity_pop_external_correlation_id, kind)
        self.callbacks: Any = None

    def start(self, memory: MemoryRecorder | None) -> None:
        start(self.collector)
        if memory is None:
            return
        from tracer.capture.callbacks import ApiCallbacks

        try:
            self.callbacks = ApiCallbacks(self.cupti, memory)
            self.callbacks.subscribe()
        except Exception as exc:  # another CUPTI subscriber (a profiler) holds the callback API
            count_error(self.collector.rec.errors, "subscribe", exc)
            self.collector.rec.meta["TRACER_LAUNCH_ARGS"] = f"not recorded: {type(exc).__name__}: {exc}"[:300]
            self.callbacks = None

    def after_fork(self, pid: int, now: int) -> None:
        self.collector.reset(pid, now)

    def stop(self, *, forked: bool, quick: bool) -> tuple[TraceRecords, list[Memory2Rec]]:
        """Flush and detach, so CUPTI never calls into Python after this. A fork child flushes
        only when it initialised CUDA itself (its parent's CUPTI state is not its own otherwise);
        `quick` (SIGTERM) skips waiting for the device."""
        rec = self.collector.rec
        if forked and not _cuda_initialized():
            rec.meta["TRACER_FORK_CHILD"] = "CUDA not initialised in this fork child: nothing flushed"
            return rec, []
        if not quick:
            _synchronize()
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


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def _synchronize() -> None:
    if _cuda_initialized():
        try:
            sys.modules["torch"].cuda.synchronize()
        except Exception:  # a dead context must not lose the trace of what ran
            pass


def make_backend(options: CaptureOptions, pid: int) -> FakeBackend | CuptiBackend:
    return FakeBackend(options, pid) if options.backend == "fake" else CuptiBackend(options, pid)
