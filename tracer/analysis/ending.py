"""Where a traced process's work stood when it ended: per stream the last kernels that ran and
those that never finished (a kernel spinning, a collective waiting for a dead rank), and per host
thread the NVTX ranges still open. Read from the trace alone: the unfinished records come from
META TRACER_UNFINISHED (what the capture's last, forced, flush handed over still running), the
open ranges from NVTX rows without an end. What a hang, a crash or a --stop-after run reports."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracer.errors import TraceFormatError
from tracer.model.trace import Trace

UNFINISHED_META = "TRACER_UNFINISHED"
LAST_N = 3  # kernels named per stream


@dataclass(frozen=True, kw_only=True)
class StreamEnd:
    device: int
    stream: int
    kernels: int  # that finished, in the trace
    last: tuple[str, ...]  # the last LAST_N kernels that finished, oldest first
    last_end_ns: int  # when the last one ended (trace clock; 0: none finished)
    unfinished: tuple[str, ...]  # kernels handed over still running (or queued: "(queued)")

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "stream": self.stream, "kernels": self.kernels, "last": list(self.last),
                "last_end_ns": self.last_end_ns, "unfinished": list(self.unfinished)}

    def line(self) -> str:
        """Kernel names shortened as the timeline's legend does (the JSON keeps them whole)."""
        from tracer.model.names import short_name

        last = ", ".join(short_name(n, 60) for n in self.last) if self.last else "no kernel finished"
        never = f"; NEVER FINISHED: {', '.join(short_name(n, 60) for n in self.unfinished)}" if self.unfinished else ""
        return f"stream {self.stream} (device {self.device}): last ran {last}{never}"


@dataclass(frozen=True, kw_only=True)
class ProcessEnd:
    label: str  # "rank 1", or the process's file stem
    how: str  # how it ended, in words
    streams: tuple[StreamEnd, ...]
    open_ranges: tuple[str, ...]  # NVTX ranges never closed, innermost last
    unflushed_s: float | None = None  # at most this long after its last flush is missing (died); None: nothing

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "how": self.how, "streams": [s.to_json() for s in self.streams],
                "open_ranges": list(self.open_ranges), "unflushed_s": self.unflushed_s}

    def lines(self) -> list[str]:
        gap = f"; up to {self.unflushed_s:g} s after its last flush may be missing" if self.unflushed_s else ""
        head = f"  {self.label}: {self.how}{gap}"
        ranges = [f"    in NVTX range{'s' if len(self.open_ranges) > 1 else ''}: {' > '.join(self.open_ranges)}"] \
            if self.open_ranges else []
        return [head, *ranges, *(f"    {s.line()}" for s in self.streams)]


def unfinished_records(trace: Trace) -> list[dict[str, Any]]:
    """META TRACER_UNFINISHED as written by the capture; a value that is not a JSON list of
    records is a corrupt file."""
    text = trace.meta.get(UNFINISHED_META)
    if text is None:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TraceFormatError(f"{trace.source}: META {UNFINISHED_META} is not JSON: {text[:80]!r}") from exc
    if not isinstance(data, list) or not all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in data):
        raise TraceFormatError(f"{trace.source}: META {UNFINISHED_META} is not a list of named records: {text[:80]!r}")
    return data


def stream_ends(trace: Trace, last_n: int = LAST_N) -> tuple[StreamEnd, ...]:
    k = trace.kernels
    running: dict[tuple[int, int], list[str]] = {}
    for r in unfinished_records(trace):
        if r.get("kind") == "kernel":
            name = r["name"] + ("" if r.get("start") else " (queued)")
            running.setdefault((int(r.get("device", 0)), int(r.get("stream", -1))), []).append(name)
    keys = {(int(d), int(s)) for d, s in zip(k.device, k.stream)} | running.keys()
    out = []
    for device, stream in sorted(keys):
        on = np.flatnonzero((k.device == device) & (k.stream == stream))
        order = on[np.argsort(k.end[on], kind="stable")]
        tail = order[-last_n:]
        out.append(StreamEnd(device=device, stream=stream, kernels=len(on),
                             last=tuple(trace.strings[int(k.name[i])] for i in tail),
                             last_end_ns=int(k.end[order[-1]]) if len(order) else 0,
                             unfinished=tuple(running.get((device, stream), ()))))
    return tuple(out)


def open_ranges(trace: Trace) -> tuple[str, ...]:
    r = trace.ranges
    idx = np.flatnonzero(r.end < 0)
    idx = idx[np.argsort(r.start[idx], kind="stable")]
    return tuple(trace.strings[int(r.text[i])] for i in idx)


def process_end(label: str, how: str, trace: Trace, unflushed: float | None = None) -> ProcessEnd:
    return ProcessEnd(label=label, how=how, streams=stream_ends(trace), open_ranges=open_ranges(trace),
                      unflushed_s=unflushed)
