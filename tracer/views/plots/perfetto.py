"""Chrome trace JSON for ui.perfetto.dev: a track per (device, stream), NVTX ranges on CPU thread
tracks, and flow arrows for event record -> wait edges. Timestamps in microseconds from the
earliest kernel or NVTX range. A job: one process track per rank holding its streams and NVTX
threads, every process on the job's aligned time base."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tracer.store.atomic import write_text
from tracer.analysis.analyze import Analysis
from tracer.model.trace import OP_KINDS
from tracer.views.timeline_layout import event_edges

if TYPE_CHECKING:
    from tracer.analysis.job_summary import JobAnalysis

GPU_PID_BASE = 1_000_000
GPU_TID_BASE = 1 << 40  # a job's GPU streams, as threads of its rank's process track (past any host tid)


@dataclass(frozen=True)
class Tracks:
    """Where one process's events go: t0 is subtracted from its timestamps; without a label, the
    lone trace's layout (a process per GPU, one for the host); with one, a single process track
    `pid` named so, holding the GPU streams and the NVTX threads; flow ids start after flow_base."""

    t0: int
    label: str = ""
    pid: int = 1
    flow_base: int = 0

    def gpu(self, device: int, stream: int) -> tuple[int, int]:
        if not self.label:
            return GPU_PID_BASE + device, stream
        return self.pid, GPU_TID_BASE + (device << 32) + (stream & 0xFFFFFFFF)

    def host(self, tid: int) -> tuple[int, int]:
        return self.pid, tid & 0xFFFFFF

    def names(self, a: Analysis) -> list[dict]:
        """Process and thread name metadata."""
        if not self.label:
            ev = [_meta("process_name", 1, "host (NVTX)")]
            ev += [_meta("process_name", GPU_PID_BASE + d, f"GPU {d}") for d in sorted({s.device for s in a.streams})]
            return ev + [_meta("thread_name", *self.gpu(s.device, s.stream), s.label) for s in a.streams]
        ev = [_meta("process_name", self.pid, self.label),
              {"ph": "M", "name": "process_sort_index", "pid": self.pid, "args": {"sort_index": self.pid}}]
        ev += [_meta("thread_name", *self.gpu(s.device, s.stream), f"GPU {s.device} {s.label}") for s in a.streams]
        tids = np.unique(a.trace.ranges.tid).tolist()
        return ev + [_meta("thread_name", *self.host(int(t)), f"CPU thread {int(t) & 0xFFFFFF} NVTX") for t in tids]


def _meta(kind: str, pid: int, *tid_and_name: int | str) -> dict:
    """A metadata event: (kind, pid, name) for a process, (kind, pid, tid, name) for a thread."""
    *tid, text = tid_and_name
    return {"ph": "M", "name": kind, "pid": pid, **({"tid": tid[0]} if tid else {}), "args": {"name": text}}


def time_origin(a: Analysis) -> int:
    """The earliest kernel start or NVTX range start (ns); 0 for a trace with neither."""
    starts = [int(x.min()) for x in (a.trace.kernels.start, a.trace.ranges.start) if len(x)]
    return min(starts) if starts else 0


def perfetto_events(a: Analysis, tracks: Tracks | None = None) -> list[dict]:
    t, k = a.trace, a.trace.kernels
    tr = tracks or Tracks(time_origin(a))
    t0 = tr.t0
    ev: list[dict] = tr.names(a)
    strings = np.array(t.strings + [None], dtype=object)
    rng = a.attribution.range_of_kernel
    nvtx = strings[np.where(rng >= 0, t.ranges.text[np.maximum(rng, 0)] if len(t.ranges.text) else -1, -1)]
    names = strings[k.name]
    cats = [kind.value for kind in OP_KINDS]
    kinds = k.kinds().tolist()
    for i in range(len(k)):
        pid, tid = tr.gpu(int(k.device[i]), int(k.stream[i]))
        ev.append({"ph": "X", "cat": cats[kinds[i]], "name": names[i], "pid": pid, "tid": tid, "ts": (int(k.start[i]) - t0) / 1e3,
                   "dur": (int(k.end[i]) - int(k.start[i])) / 1e3, "args": {"correlation": int(k.corr[i]), "nvtx": nvtx[i]}})
    r = t.ranges
    for i in range(len(r.start)):
        if r.end[i] < 0:
            continue
        pid, tid = tr.host(int(r.tid[i]))
        ev.append({"ph": "X", "cat": "nvtx", "name": t.strings[int(r.text[i])], "pid": pid, "tid": tid,
                   "ts": (int(r.start[i]) - t0) / 1e3, "dur": (int(r.end[i]) - int(r.start[i])) / 1e3})
    ev += _flows(a, tr)
    return ev


def _flows(a: Analysis, tr: Tracks) -> list[dict]:
    k, out, t0 = a.trace.kernels, [], tr.t0
    e = event_edges(a)
    for n in range(len(e)):
        common = {"cat": "event", "name": f"event {int(e.key[n])}", "id": tr.flow_base + n + 1}
        pid, tid = tr.gpu(int(e.record_device[n]), int(e.record_stream[n]))
        out.append({**common, "ph": "s", "pid": pid, "tid": tid, "ts": (int(k.end[e.producer[n]]) - t0) / 1e3 - 0.001})
        pid, tid = tr.gpu(int(e.wait_device[n]), int(e.wait_stream[n]))
        out.append({**common, "ph": "f", "bp": "e", "pid": pid, "tid": tid, "ts": (int(k.start[e.consumer[n]]) - t0) / 1e3})
    return out


def job_events(ja: JobAnalysis) -> list[dict]:
    """Every traced process as one process track ('rank 0 (host-pid-r0)'), on the job's time base."""
    from tracer.analysis.job_summary import shift_of

    parts = [(n, p, a, shift_of(p, ja.summary.origin_unix_ns)) for n, (p, a) in enumerate(zip(ja.job.processes, ja.analyses))
             if a is not None and (len(a.trace.kernels) or len(a.trace.ranges.start))]
    base = min((time_origin(a) + shift for _, _, a, shift in parts), default=0)  # the first kernel or range of any
    ev: list[dict] = []
    for n, p, a, shift in parts:
        flows = sum(1 for e in ev if e.get("ph") == "s")
        ev += perfetto_events(a, Tracks(base - shift, f"{p.label} ({p.file})", n + 1, flows))
    return ev


def write_perfetto(a: Analysis | JobAnalysis, out: Path) -> int:
    events = perfetto_events(a) if isinstance(a, Analysis) else job_events(a)
    write_text(out, json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}), make_folder=False)
    return len(events)
