"""Chrome trace JSON for ui.perfetto.dev: a track per (device, stream), NVTX ranges on CPU thread
tracks, and flow arrows for event record -> wait edges."""
from __future__ import annotations

import json
from pathlib import Path

from tracer.store.atomic import write_text
from tracer.trace.analyze import Analysis
from tracer.trace.timeline import event_edges

GPU_PID_BASE = 1_000_000


def perfetto_events(a: Analysis) -> list[dict]:
    t, k = a.trace, a.trace.kernels
    t0 = int(min(k.start.min() if len(k) else 0, t.ranges.start.min() if len(t.ranges.start) else 0))
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host (NVTX)"}}]
    for dev in sorted({int(d) for d in k.device}):
        ev.append({"ph": "M", "name": "process_name", "pid": GPU_PID_BASE + dev, "args": {"name": f"GPU {dev}"}})
    for dev, stream in sorted({(int(d), int(s)) for d, s in zip(k.device, k.stream)}):
        ev.append({"ph": "M", "name": "thread_name", "pid": GPU_PID_BASE + dev, "tid": stream, "args": {"name": f"stream {stream}"}})
    attr = a.attribution
    for i in range(len(k)):
        rng = int(attr.range_of_kernel[i])
        ev.append({"ph": "X", "cat": "kernel", "name": t.kernel_name(i), "pid": GPU_PID_BASE + int(k.device[i]),
                   "tid": int(k.stream[i]), "ts": (int(k.start[i]) - t0) / 1e3, "dur": (int(k.end[i]) - int(k.start[i])) / 1e3,
                   "args": {"correlation": int(k.corr[i]), "nvtx": t.strings[int(t.ranges.text[rng])] if rng >= 0 else None}})
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
    for n, (p, c, r, y) in enumerate(event_edges(a)):
        common = {"cat": "event", "name": f"event {y.key}", "id": n + 1}
        out.append({**common, "ph": "s", "pid": GPU_PID_BASE + r.device, "tid": r.stream, "ts": (int(k.end[p]) - t0) / 1e3 - 0.001})
        out.append({**common, "ph": "f", "bp": "e", "pid": GPU_PID_BASE + y.device, "tid": y.stream, "ts": (int(k.start[c]) - t0) / 1e3})
    return out


def write_perfetto(a: Analysis, out: Path) -> int:
    events = perfetto_events(a)
    write_text(out, json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return len(events)
