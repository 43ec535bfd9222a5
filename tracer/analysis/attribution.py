"""Attribute each kernel to an NVTX range, by the first rule that finds one:

- `launch-thread`: the innermost range open on the launching thread when its launch API was called
  (joined on correlation id), like nsys's NVTX GPU projection;
- `forward-op`: a kernel launched by a backward op (TRACER_OPS.bwdSeqNr) gets the range of the
  forward op with that sequence number (autograd runs backward ops on its own threads);
- `backward-caller`: the innermost range open at the launch on another thread of the process, the
  latest-started one (the thread blocked in `backward()`);
- `none`.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from tracer.model.arrays import intersect
from tracer.model.trace import Ranges, Trace, lex_search

if TYPE_CHECKING:  # start-up: the memory model is imported only for traces that have memory tables (issue 27)
    from tracer.model.memory import Memory

NEVER_CLOSED = np.iinfo(np.int64).max


class Rule(str, Enum):
    LAUNCH_THREAD = "launch-thread"
    FORWARD_OP = "forward-op"
    BACKWARD_CALLER = "backward-caller"
    NONE = "none"


RULES = tuple(Rule)  # Attribution.rule holds positions in this tuple


@dataclass(frozen=True, kw_only=True)
class Attribution:
    range_of_kernel: np.ndarray  # index into trace.ranges, -1 when none
    launch_tid: np.ndarray  # launching thread, -1 when the launch record is missing
    launch_start: np.ndarray  # host time of the launch call, -1 when missing
    no_launch_record: int  # kernels whose launch API record is missing from the trace
    rule: np.ndarray  # position in RULES of the rule that attributed each kernel

    @property
    def unattributed(self) -> int:
        return int((self.range_of_kernel < 0).sum())

    def rule_of(self, kernel: int) -> Rule:
        return RULES[int(self.rule[kernel])]

    def rule_counts(self) -> dict[str, int]:
        counts = np.bincount(self.rule, minlength=len(RULES))
        return {r.value: int(n) for r, n in zip(RULES, counts)}


def join_launches(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(launch thread, launch host start) per kernel via correlation id; -1 where missing."""
    k, a = trace.kernels, trace.apis
    idx = a.index_of(k.corr)
    if len(a.corr) == 0:
        return idx, idx.copy()
    return np.where(idx >= 0, a.tid[idx], -1).astype(np.int64), np.where(idx >= 0, a.start[idx], -1).astype(np.int64)


def innermost_ranges(ranges: Ranges, groups: np.ndarray, times: np.ndarray, range_groups: np.ndarray | None = None) -> np.ndarray:
    """For each (group, time) query, the range of that group open at the time with the latest start
    (ties: the lower index), -1 if none. Groups are threads (the default: ranges.tid) or processes."""
    rg = ranges.tid if range_groups is None else range_groups
    out = np.full(len(times), -1, dtype=np.int64)
    order = np.lexsort((-np.arange(len(rg)), ranges.start, rg))  # by group, start; equal starts: lower index last
    g_sorted = rg[order]
    q_order = np.argsort(groups, kind="stable")
    q_groups = groups[q_order]
    for g in intersect(q_groups[q_groups >= 0], g_sorted):
        lo, hi = np.searchsorted(g_sorted, g, "left"), np.searchsorted(g_sorted, g, "right")
        qlo, qhi = np.searchsorted(q_groups, g, "left"), np.searchsorted(q_groups, g, "right")
        mine = order[lo:hi]
        q = q_order[qlo:qhi]
        end = np.where(ranges.end[mine] < 0, NEVER_CLOSED, ranges.end[mine])
        pos = latest_open(ranges.start[mine], end, times[q])
        out[q] = np.where(pos >= 0, mine[np.maximum(pos, 0)], -1)
    return out


def latest_open(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For intervals sorted by start and query times t: the largest i with start[i] <= t <= end[i]
    (-1 if none). Walks left from the last interval started by t, skipping blocks of 2^j intervals
    that all closed before t (a table of block maxima of end), largest blocks first."""
    cur = np.searchsorted(start, t, side="right") - 1
    if len(start) == 0:
        return cur
    table = [end]
    while (1 << len(table)) <= len(end):
        prev, half = table[-1], 1 << (len(table) - 1)
        nxt = prev.copy()
        nxt[half:] = np.maximum(prev[half:], prev[:-half])
        table.append(nxt)
    for j in range(len(table) - 1, -1, -1):
        skip = (cur >= 0) & (table[j][np.maximum(cur, 0)] < t)
        cur = np.where(skip, cur - (1 << j), cur)
    cur = np.where(cur >= 0, cur, -1)
    return cur


def _process(tid: np.ndarray) -> np.ndarray:
    """nsys globalTid = (hw << 56) | (vm << 48) | (pid << 24) | tid: the process part."""
    return np.where(tid >= 0, tid >> 24, -1)


def forward_op_ranges(trace: Trace, memory: Memory, kernels: np.ndarray) -> np.ndarray:
    """For each kernel launched by a backward op: the range open on the forward op's thread when the
    forward op (same sequence number; the latest started before the backward op, else the first)
    began; else -1."""
    out = np.full(len(kernels), -1, dtype=np.int64)
    b, f = memory.backward, memory.forward
    if len(b.corr) == 0 or len(f.seq) == 0:
        return out
    corr = trace.kernels.corr[kernels]
    at = np.clip(np.searchsorted(b.corr, corr), 0, len(b.corr) - 1)
    mine = np.flatnonzero(b.corr[at] == corr)
    seq, start = b.bwd_seq[at[mine]], b.start[at[mine]]
    lo, hi = np.searchsorted(f.seq, seq, side="left"), np.searchsorted(f.seq, seq, side="right")
    fwd = np.maximum(lex_search((f.seq, f.start), (seq, start), side="right") - 1, lo)
    found = hi > lo
    out[mine[found]] = innermost_ranges(trace.ranges, f.tid[fwd[found]], f.start[fwd[found]])
    return out


def attribute(trace: Trace) -> Attribution:
    tid, start = join_launches(trace)
    rng = innermost_ranges(trace.ranges, tid, start)
    rule = np.where(rng >= 0, RULES.index(Rule.LAUNCH_THREAD), RULES.index(Rule.NONE)).astype(np.int8)
    memory = trace.memory
    if memory is not None and (rng < 0).any():
        left = np.nonzero(rng < 0)[0]
        found = forward_op_ranges(trace, memory, left)
        rng[left[found >= 0]] = found[found >= 0]
        rule[left[found >= 0]] = RULES.index(Rule.FORWARD_OP)
    left = np.nonzero((rng < 0) & (tid >= 0))[0]
    if len(left) and len(trace.ranges.start):
        found = innermost_ranges(trace.ranges, _process(tid[left]), start[left], _process(trace.ranges.tid))
        rng[left[found >= 0]] = found[found >= 0]
        rule[left[found >= 0]] = RULES.index(Rule.BACKWARD_CALLER)
    return Attribution(range_of_kernel=rng, launch_tid=tid, launch_start=start, no_launch_record=int((tid < 0).sum()), rule=rule)
