"""Chrome trace JSON for ui.perfetto.dev: a track per (device, stream), NVTX ranges on CPU thread
tracks, and flow arrows for event record -> wait edges. Timestamps in microseconds from the
earliest kernel or NVTX range."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tracer.store.atomic import write_text
from tracer.trace.analyze import Analysis
from tracer.trace.timeline import event_edges

GPU_PID_BASE = 1_000_000


def time_origin(a: Analysis) -> int:
    """The earliest kernel start or NVTX range start (ns); 0 for a trace with neither."""
    starts = [int(x.min()) for x in (a.trace.kernels.start, a.trace.ranges.start) if len(x)]
    return min(starts) if starts else 0


def perfetto_events(a: Analysis) -> list[dict]:
    t, k = a.trace, a.trace.kernels
    t0 = time_origin(a)
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host (NVTX)"}}]
    for dev in sorted({s.device for s in a.streams}):
        ev.append({"ph": "M", "name": "process_name", "pid": GPU_PID_BASE + dev, "args": {"name": f"GPU {dev}"}})
    for s in a.streams:
        ev.append({"ph": "M", "name": "thread_name", "pid": GPU_PID_BASE + s.device, "tid": s.stream,
                   "args": {"name": f"stream {s.stream}"}})
    strings = np.array(t.strings + [None], dtype=object)
    rng = a.attribution.range_of_kernel
    nvtx = strings[np.where(rng >= 0, t.ranges.text[np.maximum(rng, 0)] if len(t.ranges.text) else -1, -1)]
    names = strings[k.name]
    for i in range(len(k)):
        ev.append({"ph": "X", "cat": "kernel", "name": names[i], "pid": GPU_PID_BASE + int(k.device[i]),
                   "tid": int(k.stream[i]), "ts": (int(k.start[i]) - t0) / 1e3, "dur": (int(k.end[i]) - int(k.start[i])) / 1e3,
                   "args": {"correlation": int(k.corr[i]), "nvtx": nvtx[i]}})
    r = t.ranges
    for i in range(len(r.start)):
        if r.end[i] < 0:
            continue
        ev.append({"ph": "X", "cat": "nvtx", "name": t.strings[int(r.text[i])], "pid": 1, "tid": int(r.tid[i]) & 0xFFFFFF,
                   "ts": (int(r.start[i]) - t0) / 1e3, "dur": (int(r.end[i]) - int(r.start[i])) / 1e3})
    ev += _flows(a, t0)
    return ev


def _flows(a: Analysis, t0: int) -> list[dict]:
    k, out = a.trace.kernels, []
    e = event_edges(a)
    for n in range(len(e)):
        common = {"cat": "event", "name": f"event {int(e.key[n])}", "id": n + 1}
        out.append({**common, "ph": "s", "pid": GPU_PID_BASE + int(e.record_device[n]), "tid": int(e.record_stream[n]),
                    "ts": (int(k.end[e.producer[n]]) - t0) / 1e3 - 0.001})
        out.append({**common, "ph": "f", "bp": "e", "pid": GPU_PID_BASE + int(e.wait_device[n]), "tid": int(e.wait_stream[n]),
                    "ts": (int(k.start[e.consumer[n]]) - t0) / 1e3})
    return out


def write_perfetto(a: Analysis, out: Path) -> int:
    events = perfetto_events(a)
    write_text(out, json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return len(events)
