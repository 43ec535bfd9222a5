"""Attribute each kernel to the NVTX range open on the launching thread when its launch API was
called (joined on correlation id), like nsys's NVTX GPU projection: the innermost such range."""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from tracer.trace.model import Trace


@dataclass(frozen=True)
class Attribution:
    range_of_kernel: np.ndarray  # index into trace.ranges, -1 when none
    launch_tid: np.ndarray  # launching thread, -1 when the launch record is missing
    launch_start: np.ndarray  # host time of the launch call, -1 when missing
    no_launch_record: int  # kernels whose launch API record is missing from the trace

    @property
    def unattributed(self) -> int:
        return int((self.range_of_kernel < 0).sum())


def join_launches(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(launch thread, launch host start) per kernel via correlation id; -1 where missing."""
    k, a = trace.kernels, trace.apis
    idx = a.index_of(k.corr)
    if len(a.corr) == 0:
        return idx, idx.copy()
    return np.where(idx >= 0, a.tid[idx], -1).astype(np.int64), np.where(idx >= 0, a.start[idx], -1).astype(np.int64)


def innermost_ranges(trace: Trace, tids: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each (tid, time) query, the open range with the latest start on that thread (-1 if none).
    One sweep per thread over range starts, range ends and queries in time order."""
    r = trace.ranges
    out = np.full(len(times), -1, dtype=np.int64)
    for tid in np.unique(tids[tids >= 0]):
        q = np.nonzero(tids == tid)[0]
        mine = np.nonzero(r.tid == tid)[0]
        if len(mine) == 0:
            continue
        q = q[np.argsort(times[q], kind="stable")]
        starts = mine[np.argsort(r.start[mine], kind="stable")]
        open_heap: list[tuple[int, int]] = []  # (-start, range index): the latest-started open range on top
        si = 0
        for qi in q:
            t = times[qi]
            while si < len(starts) and r.start[starts[si]] <= t:
                heapq.heappush(open_heap, (-int(r.start[starts[si]]), int(starts[si])))
                si += 1
            out[qi] = _latest_open(open_heap, r.end, t)
    return out


def _latest_open(heap: list[tuple[int, int]], ends: np.ndarray, t: int) -> int:
    """The top of the heap is the latest start; if it closed before t the range below is not
    necessarily open either, so pop closed ones (they never reopen for later queries)."""
    while heap and 0 <= ends[heap[0][1]] < t:
        heapq.heappop(heap)
    return heap[0][1] if heap else -1


def attribute(trace: Trace) -> Attribution:
    tid, start = join_launches(trace)
    rng = innermost_ranges(trace, tid, start)
    missing = int((tid < 0).sum())
    return Attribution(rng, tid, start, missing)
