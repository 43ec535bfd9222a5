"""Where a trace's time went, per process: compute/communication overlap per step, idle gaps per
stream with their cause on the CPU side, and the critical path of a step.

- Overlap: per (step, device), communication is the union of the collective (NCCL) kernels'
  intervals, compute the union of every other kernel's (copies and memsets are neither); hidden =
  their intersection, exposed = communication - hidden (HTA's comm/comp overlap is hidden /
  communication).
- Idle gaps: per stream, the gaps between consecutive kernels (after the running maximum of ends).
  The kernel after a gap was launched either after the gap began (the GPU waited for the CPU: the
  launching thread was in a synchronize, a blocking copy or another API call when the gap began, or
  busy outside CUDA, in the NVTX range open at the launch), or before it (the GPU held it: a stream
  wait on an event recorded on another stream, else a dependency the trace does not show: copies,
  memsets). Ranked by total time per (stream, cause, detail).
- Critical path: from the step's last-ending kernel backwards, each kernel's start is bound by the
  latest of its stream predecessor's end, the ends of the kernels its stream waited on (event
  edges), and its launch call's end; a launch that followed a host synchronize continues from the
  kernel that synchronize waited for. Computed for the step with the median GPU span and the slowest
  one; per stream, its time on the path, its busy time and its tail slack (step end - its last end).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from tracer.analysis.analyze import Analysis
from tracer.model.arrays import unique
from tracer.model.trace import KERNEL, SyncKind, Trace, lex_search

if TYPE_CHECKING:
    from tracer.analysis.job_summary import JobAnalysis

MAX_LISTED_GAPS = 30
MAX_PATH_KERNELS = 50_000  # a step longer than this is not walked (said in a note)
SYNC_NAMES = ("Synchronize",)


class Cause(str, Enum):
    HOST_SYNC = "host-sync"  # the launching thread was blocked in a synchronize call
    BLOCKING_COPY = "blocking-copy"  # ... in a synchronous copy or memset
    HOST_API = "host-api"  # ... in another CUDA call (cudaMalloc, cudaFree, ...)
    LATE_LAUNCH = "late-launch"  # ... busy outside CUDA calls; detail: the NVTX range open at the launch
    EVENT_WAIT = "event-wait"  # launched in time, held by a stream wait on another stream's event
    DEPENDENCY = "dependency"  # launched in time, held by work the trace does not show (copies, memsets)
    UNKNOWN = "unknown"  # no launch record


@dataclass(frozen=True, kw_only=True)
class Overlap:
    step: str
    device: int
    comm_ns: int
    compute_ns: int
    hidden_ns: int  # communication under compute
    exposed_ns: int
    comm_streams: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        pct = round(100.0 * self.hidden_ns / self.comm_ns, 2) if self.comm_ns else None
        return {**self.__dict__, "comm_streams": list(self.comm_streams), "hidden_pct": pct}


@dataclass(frozen=True, kw_only=True)
class GapGroup:
    device: int
    stream: int
    cause: Cause
    detail: str
    gaps: int
    total_ns: int
    max_ns: int

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "cause": self.cause.value}


@dataclass(frozen=True, kw_only=True)
class PathStream:
    device: int
    stream: int
    on_path_ns: int
    busy_ns: int
    tail_slack_ns: int  # step end - the stream's last kernel end in the step

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class CriticalPath:
    step: str
    why: str  # "median" or "slowest"
    span_ns: int
    head_ns: int  # from the step's first kernel to the path's first: the walk found no edge into it
    kernels: int  # on the path
    kernel_ns: int  # GPU time of the path's kernels
    wait_ns: int  # idle on the path: waiting for a launch or a dependency
    cpu_bound_ns: int  # of which the launch came late (the CPU bounded the step)
    top: tuple[tuple[str, int, int], ...]  # (kernel name, on the path, ns)
    streams: tuple[PathStream, ...]
    edges: dict[str, int]  # how the path moved: stream, event, host-sync, launch

    def to_json(self) -> dict[str, object]:
        return {**self.__dict__, "top": [{"kernel": k, "count": n, "ns": t} for k, n, t in self.top],
                "streams": [s.to_json() for s in self.streams]}


@dataclass(frozen=True, kw_only=True)
class Explained:
    overlap: tuple[Overlap, ...]
    idle: tuple[GapGroup, ...]  # ranked by total time
    idle_by_cause: dict[str, int]
    paths: tuple[CriticalPath, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"overlap": [o.to_json() for o in self.overlap], "idle_by_cause_ns": self.idle_by_cause,
                "idle": [g.to_json() for g in self.idle[:MAX_LISTED_GAPS]], "idle_groups": len(self.idle),
                "critical_paths": [p.to_json() for p in self.paths], "notes": list(self.notes)}

    def text_lines(self) -> list[str]:
        lines = []
        comm = sum(o.comm_ns for o in self.overlap)
        if comm:
            hidden = sum(o.hidden_ns for o in self.overlap)
            lines.append(f"overlap: communication {comm / 1e6:.3f} ms, {100 * hidden / comm:.1f}% hidden under compute, "
                         f"{(comm - hidden) / 1e6:.3f} ms exposed")
        total = sum(self.idle_by_cause.values())
        if total:
            lines.append("idle: " + ", ".join(f"{c} {ns / 1e6:.3f} ms" for c, ns in self.idle_by_cause.items() if ns)
                         + f" (of {total / 1e6:.3f} ms)")
            lines += [f"  s{g.stream}: {g.cause.value} {g.detail} x{g.gaps}, {g.total_ns / 1e6:.3f} ms (max {g.max_ns / 1e3:.1f} us)"
                      for g in self.idle[:8]]
        for p in self.paths:
            on = ", ".join(f"s{s.stream} {s.on_path_ns / 1e6:.3f} ms (slack {s.tail_slack_ns / 1e6:.3f})" for s in p.streams)
            lines.append(f"critical path of {p.step} ({p.why}, {p.span_ns / 1e6:.3f} ms): {p.kernels} kernels "
                         f"{p.kernel_ns / 1e6:.3f} ms, waiting {p.wait_ns / 1e6:.3f} ms ({p.cpu_bound_ns / 1e6:.3f} ms on "
                         f"late launches); streams: {on}")
        return lines + [f"note: {n}" for n in self.notes]


# ---- intervals ------------------------------------------------------------------------------------

def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted disjoint intervals."""
    if len(start) == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    new = np.r_[True, s[1:] > e[:-1]]
    head = np.flatnonzero(new)
    return s[head], np.maximum.reduceat(e, head)


def covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted intervals (s, e) before each time t."""
    if len(s) == 0:
        return np.zeros(len(t), dtype=np.int64)
    cum = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, t, side="right") - 1
    inside = np.clip(t - s[np.maximum(i, 0)], 0, (e - s)[np.maximum(i, 0)])
    return np.where(i >= 0, cum[np.maximum(i, 0)] + inside, 0)


def intersection(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    return int((covered(*b, a[1]) - covered(*b, a[0])).sum())


# ---- overlap --------------------------------------------------------------------------------------

def overlap(trace: Trace, comm: np.ndarray, steps: tuple[list[str], np.ndarray]) -> tuple[Overlap, ...]:
    k = trace.kernels
    names, step = steps
    if not comm.any():
        return ()
    compute = ~comm & (k.kinds() == KERNEL)  # copies and memsets are neither (HTA's MEMORY kernels)
    label = [*names, "outside steps" if names else "whole run"]
    bucket = np.where(step >= 0, step, len(names))
    order = np.lexsort((k.device, bucket))
    heads = np.flatnonzero(np.r_[True, (bucket[order][1:] != bucket[order][:-1]) | (k.device[order][1:] != k.device[order][:-1])])
    out = []
    for lo, hi in zip(heads.tolist(), np.r_[heads[1:], len(order)].tolist()):
        idx = order[lo:hi]
        c, p = idx[comm[idx]], idx[compute[idx]]
        if not len(c):
            continue
        cu, pu = merged(k.start[c], k.end[c]), merged(k.start[p], k.end[p])
        comm_ns, hidden = int((cu[1] - cu[0]).sum()), intersection(cu, pu)
        out.append(Overlap(step=label[int(bucket[idx[0]])], device=int(k.device[idx[0]]), comm_ns=comm_ns,
                           compute_ns=int((pu[1] - pu[0]).sum()), hidden_ns=hidden, exposed_ns=comm_ns - hidden,
                           comm_streams=tuple(sorted(set(k.stream[c].tolist())))))
    return tuple(out)


# ---- idle gaps ------------------------------------------------------------------------------------

CAUSES = tuple(Cause)


@dataclass(frozen=True)
class _Gaps:
    start: np.ndarray  # the gap's start (the stream's running end)
    end: np.ndarray  # the next kernel's start
    prev: np.ndarray  # kernel before the gap
    next: np.ndarray  # kernel after it


def stream_gaps(trace: Trace) -> _Gaps:
    k = trace.kernels
    parts: list[tuple[np.ndarray, ...]] = []
    order = np.lexsort((k.start, k.stream, k.device))
    dev, st = k.device[order], k.stream[order]
    heads = np.flatnonzero(np.r_[True, (dev[1:] != dev[:-1]) | (st[1:] != st[:-1])]) if len(order) else order
    for lo, hi in zip(heads.tolist(), np.r_[heads[1:], len(order)].tolist()):
        idx = order[lo:hi]
        run_end = np.maximum.accumulate(k.end[idx])
        i = np.flatnonzero(k.start[idx][1:] > run_end[:-1])
        parts.append((run_end[i], k.start[idx][i + 1], idx[i], idx[i + 1]))
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return _Gaps(e, e, e, e)
    return _Gaps(*(np.concatenate([p[j] for p in parts]) for j in range(4)))


def _api_in_progress(trace: Trace, tid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per (thread, time): the row in trace.apis of the call running on that thread then, -1 none."""
    apis = trace.apis
    if len(apis.start) == 0:
        return np.full(len(at), -1, dtype=np.int64)
    order = np.lexsort((apis.start, apis.tid))
    ts, ss = apis.tid[order], apis.start[order]
    j = lex_search((ts, ss), (tid, at), side="right") - 1
    jj = np.maximum(j, 0)
    ok = (j >= 0) & (ts[jj] == tid) & (apis.end[order[jj]] >= at)  # a call returning as the gap begins held it
    return np.where(ok, order[jj], -1)


def _api_cause(name: str) -> Cause:
    if any(s in name for s in SYNC_NAMES):
        return Cause.HOST_SYNC
    if ("Memcpy" in name or "Memset" in name) and "Async" not in name:
        return Cause.BLOCKING_COPY
    return Cause.HOST_API


def _event_waits(trace: Trace, g: _Gaps) -> np.ndarray:
    """Per gap: the stream whose event the next kernel's stream waited on between the two kernels (-1 none)."""
    k, out = trace.kernels, np.full(len(g.next), -1, dtype=np.int64)
    waits: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    records = {r.key: r for r in trace.records}
    for y in trace.syncs:
        if y.kind is SyncKind.WAIT and y.key in records:
            waits[(y.device, y.stream)].append((y.corr, records[y.key].stream))
    for (dev, stream), items in waits.items():
        items.sort()
        corr = np.array([c for c, _ in items], dtype=np.int64)
        src = np.array([s for _, s in items], dtype=np.int64)
        m = np.flatnonzero((k.device[g.next] == dev) & (k.stream[g.next] == stream))
        hi = np.searchsorted(corr, k.corr[g.next[m]])  # waits submitted before the next kernel
        lo = np.searchsorted(corr, k.corr[g.prev[m]])  # ... and after the one before the gap
        hit = hi > lo
        out[m[hit]] = src[hi[hit] - 1]
    return out


def idle_gaps(a: Analysis) -> tuple[tuple[GapGroup, ...], dict[str, int]]:
    from tracer.analysis.job_summary import range_key

    t, attr = a.trace, a.attribution
    g = stream_gaps(t)
    launch, tid = attr.launch_start[g.next], attr.launch_tid[g.next]
    late = (launch >= 0) & (launch > g.start)
    api = np.where(late, _api_in_progress(t, tid, g.start), -1)
    cause = np.full(len(g.next), CAUSES.index(Cause.DEPENDENCY), dtype=np.int64)
    detail = np.full(len(g.next), -1, dtype=np.int64)  # a string id, or a stream
    api_names = t.apis.name[np.maximum(api, 0)] if len(t.apis.name) else np.zeros(len(api), dtype=np.int64)
    has_api = api >= 0
    if has_api.any():
        per_name = {int(n): CAUSES.index(_api_cause(t.strings[int(n)])) for n in unique(api_names[has_api]).tolist()}
        cause[has_api] = [per_name[int(n)] for n in api_names[has_api].tolist()]
        detail[has_api] = api_names[has_api]
    busy = late & ~has_api
    cause[busy] = CAUSES.index(Cause.LATE_LAUNCH)
    rng = attr.range_of_kernel[g.next]
    detail[busy] = np.where(rng[busy] >= 0, t.ranges.text[np.maximum(rng[busy], 0)] if len(t.ranges.text) else -1, -1)
    held = ~late & (launch >= 0)
    src = _event_waits(t, g)
    ev = held & (src >= 0)
    cause[ev], detail[ev] = CAUSES.index(Cause.EVENT_WAIT), src[ev]
    cause[launch < 0] = CAUSES.index(Cause.UNKNOWN)
    return _group_gaps(t, g, cause, detail, range_key)


def _group_gaps(t: Trace, g: _Gaps, cause: np.ndarray, detail: np.ndarray,
                range_key: Callable[[str], str]) -> tuple[tuple[GapGroup, ...], dict[str, int]]:
    k = t.kernels
    dur = g.end - g.start
    table = np.stack([k.device[g.next], k.stream[g.next], cause, detail], axis=1) if len(dur) else np.zeros((0, 4), dtype=np.int64)
    keys, inv = np.unique(table, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    total = np.bincount(inv, weights=dur, minlength=len(keys))
    count = np.bincount(inv, minlength=len(keys))
    peak = np.zeros(len(keys), dtype=np.int64)
    np.maximum.at(peak, inv, dur)
    merged_groups: dict[tuple[int, int, Cause, str], list[int]] = {}
    for (dev, stream, c, d), n, tot, mx in zip(keys.tolist(), count.tolist(), total.tolist(), peak.tolist()):
        cause_ = CAUSES[c]
        text = (f"on s{d}'s event" if cause_ is Cause.EVENT_WAIT else
                (t.strings[d] if cause_ in (Cause.HOST_SYNC, Cause.BLOCKING_COPY, Cause.HOST_API) else
                 range_key(t.strings[d]) if d >= 0 else ("<no NVTX range>" if cause_ is Cause.LATE_LAUNCH else "")))
        acc = merged_groups.setdefault((dev, stream, cause_, text), [0, 0, 0])
        acc[0], acc[1], acc[2] = acc[0] + n, acc[1] + int(tot), max(acc[2], mx)
    groups = sorted((GapGroup(device=dv, stream=s, cause=c, detail=d, gaps=n, total_ns=tot, max_ns=mx)
                     for (dv, s, c, d), (n, tot, mx) in merged_groups.items()), key=lambda x: -x.total_ns)
    by_cause = {c.value: 0 for c in CAUSES}
    for x in groups:
        by_cause[x.cause.value] += x.total_ns
    return tuple(groups), by_cause


# ---- critical path --------------------------------------------------------------------------------

class _Graph:
    """What the backward walk asks of one trace: stream predecessors, event producers, launch ends,
    and the kernel a host synchronize waited for."""

    def __init__(self, a: Analysis) -> None:
        t, k = a.trace, a.trace.kernels
        self.a, self.k = a, k
        order = np.lexsort((k.corr, k.stream, k.device))
        same = np.r_[False, (k.device[order][1:] == k.device[order][:-1]) & (k.stream[order][1:] == k.stream[order][:-1])]
        self.pred = np.full(len(k), -1, dtype=np.int64)
        self.pred[order[same]] = order[np.flatnonzero(same) - 1]
        self.by_stream = {key: order[lo:hi] for key, lo, hi in self._runs(order)}
        row = t.apis.index_of(k.corr)
        self.launch_end = np.where(row >= 0, t.apis.end[np.maximum(row, 0)] if len(t.apis.end) else -1, -1)
        self.records = {r.key: r for r in t.records}
        waits: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for y in t.syncs:
            if y.kind is SyncKind.WAIT and y.key in self.records:
                waits[(y.device, y.stream)].append((y.corr, y.key))
        self.waits = {key: sorted(v) for key, v in waits.items()}
        self.host = sorted((y for y in t.syncs if y.kind in (SyncKind.STREAM, SyncKind.EVENT, SyncKind.CONTEXT)),
                           key=lambda y: y.end)
        self.host_end = np.array([y.end for y in self.host], dtype=np.int64)

    def _runs(self, order: np.ndarray) -> list[tuple[tuple[int, int], int, int]]:
        k = self.k
        if len(order) == 0:
            return []
        d, s = k.device[order], k.stream[order]
        heads = np.flatnonzero(np.r_[True, (d[1:] != d[:-1]) | (s[1:] != s[:-1])])
        return [((int(d[lo]), int(s[lo])), lo, hi) for lo, hi in zip(heads.tolist(), np.r_[heads[1:], len(order)].tolist())]

    def last_before(self, device: int, stream: int, corr: int) -> int:
        """The last kernel on (device, stream) submitted before corr, -1 none."""
        idx = self.by_stream.get((device, stream))
        if idx is None:
            return -1
        at = int(np.searchsorted(self.k.corr[idx], corr)) - 1
        return int(idx[at]) if at >= 0 else -1

    def producers(self, c: int) -> list[int]:
        """Kernels that c's stream waited on (event records) after its previous kernel was submitted."""
        k = self.k
        key = (int(k.device[c]), int(k.stream[c]))
        lo = int(k.corr[self.pred[c]]) if self.pred[c] >= 0 else -1
        out = []
        for corr, ev in self.waits.get(key, ()):
            if lo < corr < int(k.corr[c]):
                r = self.records[ev]
                p = self.last_before(r.device, r.stream, r.corr)
                if p >= 0:
                    out.append(p)
        return out

    def synced(self, c: int, before: int) -> int:
        """The kernel a host synchronize on c's launching thread waited for, when one ended at or
        before c's launch and after `before`; -1 none."""
        tid, at = int(self.a.attribution.launch_tid[c]), int(self.a.attribution.launch_start[c])
        hi = int(np.searchsorted(self.host_end, at, side="right"))
        for y in reversed(self.host[max(0, hi - 8):hi]):
            if y.end <= before:
                break
            if y.tid == tid:
                k = self.k
                on = (k.end <= y.end) & (k.device == y.device)
                if y.kind is SyncKind.STREAM:
                    on &= k.stream == y.stream
                cand = np.flatnonzero(on)
                return int(cand[np.argmax(k.end[cand])]) if len(cand) else -1
        return -1


def _walk(gr: _Graph, members: np.ndarray) -> tuple[list[int], dict[str, int], int, int]:
    """The path's kernels (last first), how it moved (edge counts), idle ns on it, and of that the ns
    spent waiting for a launch that came after the GPU-side predecessor had finished."""
    k = gr.k
    inside = np.zeros(len(k), dtype=bool)
    inside[members] = True
    c = int(members[np.argmax(k.end[members])])
    first = int(k.start[members].min())  # idle before the step's first kernel is not the step's
    path, edges, wait, cpu = [c], {"stream": 0, "event": 0, "host-sync": 0, "late-launch": 0}, 0, 0
    while True:
        cands = [(int(k.end[p]), p, "stream") for p in ([int(gr.pred[c])] if gr.pred[c] >= 0 else [])]
        cands += [(int(k.end[p]), p, "event") for p in gr.producers(c)]
        gpu_ready = max(cands)[0] if cands else -1
        if gr.launch_end[c] > gpu_ready:  # the launch came after the GPU could have run it: was the CPU waiting?
            s = gr.synced(c, gpu_ready)
            cands += [(int(k.end[s]), s, "host-sync")] if s >= 0 else []
        if not cands:
            return path, edges, wait, cpu
        ready, p, how = max(cands)
        ready = max(ready, first)
        start = int(k.start[c])
        wait += max(0, start - ready)
        if gr.launch_end[c] > ready:
            edges["late-launch"] += 1
            cpu += max(0, min(start, int(gr.launch_end[c])) - ready)
        if not inside[p]:
            return path, edges, wait, cpu
        edges[how] += 1
        path.append(p)
        c = p


def critical_path(gr: _Graph, step: str, why: str, members: np.ndarray) -> CriticalPath:
    k, t = gr.k, gr.a.trace
    path, edges, wait, cpu = _walk(gr, members)
    p = np.array(path, dtype=np.int64)
    dur = k.end[p] - k.start[p]
    step_start, step_end = int(k.start[members].min()), int(k.end[members].max())
    names: dict[str, list[int]] = {}
    for i, d in zip(p.tolist(), dur.tolist()):
        acc = names.setdefault(t.kernel_name(i), [0, 0])
        acc[0], acc[1] = acc[0] + 1, acc[1] + d
    top = tuple(sorted(((n, c, ns) for n, (c, ns) in names.items()), key=lambda x: -x[2])[:10])
    streams = []
    by_stream = members[np.lexsort((k.stream[members], k.device[members]))]  # stable: members' order within a stream
    cut = np.flatnonzero(np.diff(k.device[by_stream]) | np.diff(k.stream[by_stream])) + 1
    path_by = p[np.lexsort((k.stream[p], k.device[p]))]
    path_keys = (k.device[path_by], k.stream[path_by])
    heads = by_stream[np.concatenate(([0], cut))] if len(by_stream) else by_stream
    lo, hi = (lex_search(path_keys, (k.device[heads], k.stream[heads]), side) for side in ("left", "right"))
    for g, on in enumerate(np.split(by_stream, cut) if len(by_stream) else ()):
        dev, stream = int(k.device[on[0]]), int(k.stream[on[0]])
        on_path = path_by[lo[g]:hi[g]]
        busy = merged(k.start[on], k.end[on])
        streams.append(PathStream(device=dev, stream=stream, on_path_ns=int((k.end[on_path] - k.start[on_path]).sum()),
                                  busy_ns=int((busy[1] - busy[0]).sum()), tail_slack_ns=step_end - int(k.end[on].max())))
    return CriticalPath(step=step, why=why, span_ns=step_end - step_start, head_ns=int(k.start[p[-1]]) - step_start,
                        kernels=len(p), kernel_ns=int(dur.sum()),
                        wait_ns=wait, cpu_bound_ns=cpu, top=top, streams=tuple(streams), edges=edges)


def critical_paths(a: Analysis, steps: tuple[list[str], np.ndarray]) -> tuple[tuple[CriticalPath, ...], tuple[str, ...]]:
    k = a.trace.kernels
    names, step = steps
    if not len(k):
        return (), ()
    if not names:
        chosen = [("whole run", "whole run", np.arange(len(k)))]
    else:
        spans = [(int(k.end[m].max() - k.start[m].min()), i, m) for i, n in enumerate(names)
                 if len(m := np.flatnonzero(step == i))]
        by_span = sorted(spans)
        median, slowest = by_span[(len(by_span) - 1) // 2], by_span[-1]
        chosen = [(names[median[1]], "median", median[2])]
        if slowest[1] != median[1]:
            chosen.append((names[slowest[1]], "slowest", slowest[2]))
    too_long = [n for n, _, m in chosen if len(m) > MAX_PATH_KERNELS]
    notes = tuple(f"critical path of {n} not walked: more than {MAX_PATH_KERNELS} kernels" for n in too_long)
    gr = _Graph(a)
    return tuple(critical_path(gr, n, why, m) for n, why, m in chosen if len(m) <= MAX_PATH_KERNELS), notes


def explain(a: Analysis) -> Explained:
    from tracer.analysis.job_summary import collective_mask, kernel_steps

    steps = kernel_steps(a.trace, a)
    idle, by_cause = idle_gaps(a)
    paths, notes = critical_paths(a, steps)
    return Explained(overlap=overlap(a.trace, collective_mask(a.trace), steps), idle=idle, idle_by_cause=by_cause,
                     paths=paths, notes=notes)


def with_time(result: Analysis | JobAnalysis) -> Analysis | JobAnalysis:
    """The analysis (a job's: every traced process's) with `explained` filled in."""
    from dataclasses import replace

    from tracer.analysis.job_summary import JobAnalysis

    if isinstance(result, JobAnalysis):
        return replace(result, analyses=tuple(None if x is None else replace(x, explained=explain(x)) for x in result.analyses))
    return replace(result, explained=explain(result))
