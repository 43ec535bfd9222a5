"""A job analysed: every traced process on its own (`analyze()`: ordering and hazards are per
process, correlation ids are per process), plus what only the job shows: lanes per (rank, device,
stream), NCCL kernels as collectives, per rank and step the kernels, busy time and largest gap, the
straggler of each collective, and how well the processes' clocks agree.

Time base: each process's CUPTI timestamps + its offset (unix - cupti, the median of its marker's
clock pairs) = wall-clock nanoseconds; times in the JSON are from the job's origin (the first
kernel of any process on that base). Checked, where collectives exist, by the spread of the end
times of the same collective across ranks (a collective ends on all ranks together): the stated
alignment error is the larger of what the clock pairs and the collectives say.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from statistics import median
from typing import Any

import numpy as np

from tracer.errors import TraceFormatError, UsageError
from tracer.schemas import header
from tracer.analysis.analyze import Analysis, analyze
from tracer.readers.job import Job, JobProcess, Outcome
from tracer.model.trace import Trace
from tracer.analysis.pairs import PairMode, PairSpec

NCCL = re.compile("nccl", re.IGNORECASE)
NCCL_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
STEP = re.compile(r"^(?:ProfilerStep#|step|iteration|iter)[ _#:.-]?(\d+)$", re.IGNORECASE)
WHOLE_RUN, OUTSIDE = "whole run", "outside steps"
MAX_LISTED_COLLECTIVES = 200
NEVER_CLOSED = np.iinfo(np.int64).max


@dataclass(frozen=True, kw_only=True)
class JobLane:
    label: str  # "rank R GPU d stream s"
    process: str  # the process's label
    rank: int | None
    device: int
    stream: int
    kernels: int
    collectives: int
    busy_ns: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True, kw_only=True)
class StepStats:
    step: str  # the step's NVTX name, "outside steps", or "whole run" without step ranges
    kernels: int
    start_ns: int  # first kernel start, from the job's origin
    span_ns: int  # first kernel start to last kernel end
    busy_ns: int  # time at least one kernel of the process ran
    largest_gap_ns: int  # longest time inside the span with no kernel running

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RankSteps:
    process: str
    rank: int | None
    steps: tuple[StepStats, ...]

    def to_json(self) -> dict[str, Any]:
        return {"process": self.process, "rank": self.rank, "steps": [s.to_json() for s in self.steps]}


@dataclass(frozen=True, kw_only=True)
class CollectiveCall:
    process: str
    device: int
    stream: int
    name: str
    start_ns: int  # from the job's origin
    end_ns: int


@dataclass(frozen=True, kw_only=True)
class Collective:
    """The k-th collective of every rank that ran any: who started it last, and by how much."""

    index: int
    op: str  # AllReduce, Broadcast, ... (from the kernel name); "mixed" when the ranks disagree
    calls: tuple[CollectiveCall, ...]
    straggler: str  # the process that started it last
    late_ns: int  # its start - the earliest start: how long the first rank waited for it
    end_spread_ns: int  # latest end - earliest end (clock error plus real jitter)
    within_error: bool  # late_ns is no more than the alignment error: the straggler is uncertain

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "op": self.op, "straggler": self.straggler, "late_ns": self.late_ns,
                "end_spread_ns": self.end_spread_ns, "within_error": self.within_error,
                "calls": [c.__dict__ for c in self.calls]}


@dataclass(frozen=True, kw_only=True)
class Clock:
    offsets_ns: dict[str, int | None]  # per traced process: unix - cupti
    pair_spread_ns: dict[str, int | None]  # per traced process: how its own pairs disagree
    pairs_error_ns: int | None  # the largest spread (None: no process had two pairs)
    collectives_checked: int
    end_spread_median_ns: int | None
    end_spread_max_ns: int | None
    residual_ns: dict[str, int]  # per rank: median of (its end - the median end) over collectives
    error_ns: int | None  # the alignment error stated (None: unknown)
    basis: str
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "notes": list(self.notes),
                "time_base": "unix ns: each process's CUPTI timestamps + its offset (median of its clock pairs)"}


@dataclass(frozen=True, kw_only=True)
class JobSummary:
    origin_unix_ns: int
    lanes: tuple[JobLane, ...]
    ranks: tuple[RankSteps, ...]
    collectives_per_process: dict[str, int]
    collectives: tuple[Collective, ...]
    clock: Clock

    def stragglers(self) -> dict[str, dict[str, int]]:
        """Per process: collectives it started last, the median and largest lateness then."""
        out: dict[str, dict[str, int]] = {}
        for label in self.collectives_per_process:
            late = [c.late_ns for c in self.collectives if c.straggler == label and len(c.calls) > 1]
            out[label] = {"last": len(late), "late_median_ns": round(median(late)) if late else 0,
                          "late_max_ns": max(late, default=0)}
        return out


@dataclass(frozen=True, kw_only=True)
class JobAnalysis:
    job: Job
    analyses: tuple[Analysis | None, ...]  # per process of job.processes, None where no trace
    summary: JobSummary
    pair_spec: PairSpec
    notes: tuple[str, ...] = field(default=())

    @property
    def incomplete(self) -> tuple[JobProcess, ...]:
        """Processes whose work is not (all) in a trace: died without one, or partial."""
        return tuple(p for p in self.job.processes if p.outcome in (Outcome.NO_TRACE, Outcome.PARTIAL))

    def incomplete_lines(self) -> list[str]:
        return [f"{p.label} ({p.file}): {p.outcome.value.upper()}, {p.how}" + (f"; {p.note}" if p.note else "")
                for p in self.incomplete]

    def failures(self, fail_on_unordered: bool, fail_on_hazard: bool) -> list[str]:
        """Every process's failures, named by its label; a process without a (complete) trace fails
        any check: its ordering and hazards are unknown. One traced without kernels has nothing to judge."""
        out = [f"{p.label}: {why}" for p, a in zip(self.job.processes, self.analyses) if a is not None and len(a.trace.kernels)
               for why in a.failures(fail_on_unordered, fail_on_hazard)]
        if fail_on_unordered or fail_on_hazard:
            out += [f"{p.label}: {'trace is partial' if p.outcome is Outcome.PARTIAL else 'no trace'} "
                    f"({p.how}): its ordering and hazards are unknown" for p in self.incomplete]
        return out

    def to_json(self) -> dict[str, Any]:
        s, traced = self.summary, [(p, a) for p, a in zip(self.job.processes, self.analyses) if a is not None]
        counts: Counter[str] = Counter()
        for _, a in traced:
            counts.update(a.pair_counts)
        return {
            **header("job"), "source": str(self.job.run_dir), "pair_spec": self.pair_spec.to_json(),
            "kernels": sum(int((a.trace.kernels.kinds() == 0).sum()) for _, a in traced), "pair_counts": dict(counts),
            "complete": not self.incomplete, "incomplete": self.incomplete_lines(),
            "job": {
                "processes": [p.to_json() for p in self.job.processes], "untraced": list(self.job.untraced),
                "origin_unix_ns": s.origin_unix_ns, "lanes": [x.to_json() for x in s.lanes],
                "ranks": [r.to_json() for r in s.ranks],
                "collectives": {"per_process": s.collectives_per_process, "matched": len(s.collectives),
                                "listed": [c.to_json() for c in s.collectives[:MAX_LISTED_COLLECTIVES]]},
                "stragglers": s.stragglers(), "clock": s.clock.to_json(),
            },
            "analyses": [{"process": p.label, "file": p.file, "outcome": p.outcome.value, **a.to_json()} for p, a in traced],
            "notes": list(self.notes),
        }


# ---- steps ------------------------------------------------------------------------------------

def step_key(name: str) -> str | None:
    """The step a range names: itself when its name (or first path segment) is step3, iteration 3,
    iter_3 or ProfilerStep#3; else None."""
    head = name.split("/", 1)[0].strip()
    return head if STEP.match(head) else None


def step_keys(names: list[str]) -> list[str | None]:
    """step_key of each name, computed once per distinct first path segment (range names that
    carry their step number are all distinct, their first segments are not)."""
    seen: dict[str, str | None] = {}
    out = []
    for name in names:
        head = name.split("/", 1)[0]
        key = seen[head] if head in seen else seen.setdefault(head, step_key(head))
        out.append(key)
    return out


def range_keys(names: list[str]) -> list[str]:
    """range_key of each name, the first path segment judged once per distinct segment."""
    seen: dict[str, str] = {}
    out = []
    for name in names:
        head, sep, rest = name.partition("/")
        pooled = seen[head] if head in seen else seen.setdefault(head, range_key(head))
        out.append(name if pooled == head else pooled + sep + rest)
    return out


STEP_PREFIXES = ("profilerstep#", "step", "iteration", "iter")
STEP_SEPARATORS = " _#:.-"


def range_key(name: str) -> str:
    """A range name with its step number pooled: 'step3/fwd' -> 'step*/fwd', 'ProfilerStep#3' ->
    'ProfilerStep#*' (the names STEP matches; string operations, no regex: called per distinct name)."""
    head, sep, rest = name.partition("/")
    h = head.strip()
    stem = h.rstrip("0123456789")
    if stem == h:
        return name
    low = stem.lower()
    if low in STEP_PREFIXES or (low[-1:] in STEP_SEPARATORS and low[:-1] in STEP_PREFIXES):
        return f"{stem}*{sep}{rest}"
    return name


def kernel_steps(trace: Trace, a: Analysis) -> tuple[list[str], np.ndarray]:
    """(step names in order, step index per kernel, -1 for none): the step of the range the kernel
    is attributed to, else the step range open (on any thread) when it was launched."""
    r, k = trace.ranges, trace.kernels
    u, inv = np.unique(r.text, return_inverse=True)
    key_of_text = step_keys([trace.strings[int(sid)] for sid in u.tolist()])
    keys = sorted({x for x in key_of_text if x is not None})
    step = np.full(len(k), -1, dtype=np.int64)
    if not keys:
        return [], step
    at = {x: i for i, x in enumerate(keys)}
    of_range = np.array([-1 if x is None else at[x] for x in key_of_text], dtype=np.int64)[inv]  # per range, -1: no step
    sel = np.flatnonzero(of_range >= 0)
    lo = np.full(len(keys), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(keys), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, of_range[sel], r.start[sel])
    np.maximum.at(hi, of_range[sel], np.where(r.end[sel] >= 0, r.end[sel], NEVER_CLOSED))
    order = np.argsort(lo, kind="stable")  # steps in order of their first start
    names = [keys[i] for i in order.tolist()]
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    of_range = np.where(of_range >= 0, rank[np.maximum(of_range, 0)], -1)
    starts, ends = lo[order], hi[order]
    rk = a.attribution.range_of_kernel
    step = np.where(rk >= 0, of_range[np.maximum(rk, 0)], -1) if len(of_range) else step
    t = np.where(a.attribution.launch_start >= 0, a.attribution.launch_start, k.start)
    at_ = np.searchsorted(starts, t, side="right") - 1
    inside = (at_ >= 0) & (ends[np.maximum(at_, 0)] >= t)
    return names, np.where(step >= 0, step, np.where(inside, at_, -1))


def union_stats(start: np.ndarray, end: np.ndarray) -> tuple[int, int, int]:
    """(span, busy, largest gap) of a set of intervals on any streams."""
    if len(start) == 0:
        return 0, 0, 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    gaps = np.maximum(s[1:] - e[:-1], 0)
    span = int(e[-1] - s[0])
    return span, span - int(gaps.sum()), int(gaps.max()) if len(gaps) else 0


def rank_steps(p: JobProcess, a: Analysis, shift: int) -> RankSteps:
    """Per step of the process (in order), then the kernels outside every step; one 'whole run'
    row when the process has no step ranges. `shift`: to the job's time base, from its origin."""
    k = a.trace.kernels
    names, step = kernel_steps(a.trace, a)
    rows = []
    kernel = k.kinds() == 0  # steps count kernels (copies and memsets are in the analysis, not here)
    buckets = [(n, kernel & (step == i)) for i, n in enumerate(names)] + [(OUTSIDE if names else WHOLE_RUN, kernel & (step < 0))]
    for name, sel in buckets:
        if not sel.any():
            continue
        span, busy, gap = union_stats(k.start[sel], k.end[sel])
        rows.append(StepStats(step=name, kernels=int(sel.sum()), start_ns=int(k.start[sel].min()) + shift, span_ns=span, busy_ns=busy,
                              largest_gap_ns=gap))
    return RankSteps(p.label, p.rank, tuple(rows))


# ---- collectives ------------------------------------------------------------------------------

def collective_mask(trace: Trace) -> np.ndarray:
    """Kernels whose name holds 'nccl' (one test per distinct name)."""
    u, inv = np.unique(trace.kernels.name, return_inverse=True)
    hit = np.array([bool(NCCL.search(trace.strings[int(s)])) for s in u], dtype=bool)
    return hit[inv] if len(u) else np.zeros(0, dtype=bool)


def collective_op(name: str) -> str:
    m = NCCL_OP.search(name)
    return m.group(1) if m else "nccl"


def process_collectives(p: JobProcess, trace: Trace, shift: int) -> list[CollectiveCall]:
    k = trace.kernels
    idx = np.flatnonzero(collective_mask(trace))
    idx = idx[np.argsort(k.start[idx], kind="stable")]
    return [CollectiveCall(process=p.label, device=int(k.device[i]), stream=int(k.stream[i]), name=trace.kernel_name(int(i)),
                           start_ns=int(k.start[i]) + shift, end_ns=int(k.end[i]) + shift) for i in idx.tolist()]


def match_collectives(calls: dict[str, list[CollectiveCall]], error_ns: int | None) -> tuple[Collective, ...]:
    """The k-th collective of each process that ran any, for k up to the fewest any ran; none when
    fewer than two processes ran collectives (no one to be late for)."""
    runs = [c for c in calls.values() if c]
    if len(runs) < 2:
        return ()
    out = []
    for k in range(min((len(c) for c in runs), default=0)):
        row = tuple(c[k] for c in runs)
        last = max(row, key=lambda c: c.start_ns)
        late = last.start_ns - min(c.start_ns for c in row)
        ops = {collective_op(c.name) for c in row}
        out.append(Collective(index=k, op=ops.pop() if len(ops) == 1 else "mixed", calls=row, straggler=last.process,
                              late_ns=late, end_spread_ns=max(c.end_ns for c in row) - min(c.end_ns for c in row),
                              within_error=error_ns is None or late <= error_ns))
    return tuple(out)


# ---- clocks -----------------------------------------------------------------------------------

ENDS_TOGETHER = ("AllReduce",)


def clock_check(job: Job, collectives: tuple[Collective, ...]) -> Clock:
    """The clock pairs' own spread, checked against the end times of the collectives; the error
    stated is the larger, and unknown where neither can vouch for every process."""
    traced = [p for p, _ in job.traced()]
    offsets = {p.label: p.clock.offset_ns for p in traced}
    spreads = {p.label: p.clock.spread_ns for p in traced}
    known = [s for s in spreads.values() if s is not None]
    pairs_error = max(known) if known and len(known) == len(spreads) else None
    multi = [c for c in collectives if len(c.calls) > 1]
    # a broadcast's root may finish long before the others; all-reduces end together
    multi = [c for c in multi if c.op in ENDS_TOGETHER] or multi
    spread = [c.end_spread_ns for c in multi]
    med = round(median(spread)) if spread else None
    residual: dict[str, list[int]] = {}
    for c in multi:
        mid = median(x.end_ns for x in c.calls)
        for x in c.calls:
            residual.setdefault(x.process, []).append(round(x.end_ns - mid))
    hosts = len({p.host for p in traced}) > 1
    if med is not None and (pairs_error is None or hosts or med >= pairs_error):
        error, basis = med, "collective end spread (median)"
    elif pairs_error is not None and not hosts:
        error, basis = pairs_error, "clock pairs"
    else:
        error, basis = None, ("unknown: several hosts and no collective to compare their wall clocks" if hosts else
                              "unknown: a process has one clock pair or none, and no collective checks it")
    return Clock(offsets_ns=offsets, pair_spread_ns=spreads, pairs_error_ns=pairs_error, collectives_checked=len(multi), end_spread_median_ns=med,
                 end_spread_max_ns=max(spread) if spread else None,
                 residual_ns={k: round(median(v)) for k, v in residual.items()}, error_ns=error, basis=basis,
                 notes=_clock_notes(traced, offsets, spreads))


def _clock_notes(traced: list[JobProcess], offsets: dict[str, int | None], spreads: dict[str, int | None]) -> tuple[str, ...]:
    notes = []
    if any(o is None for o in offsets.values()):
        notes.append("processes without clock pairs are not aligned (offset 0): "
                     + ", ".join(k for k, o in offsets.items() if o is None))
    if any(s is None and offsets[k] is not None for k, s in spreads.items()):
        notes.append("processes with one clock pair (they died before their end pair, or Kineto traces, already on their "
                     "host's wall clock): their drift is not measured")
    if len({p.host for p in traced}) > 1:
        notes.append("several hosts: the clock pairs tie each trace to its host's wall clock, not the hosts' clocks "
                     "to each other (NTP); the collectives do")
    return tuple(notes)


# ---- the whole job ----------------------------------------------------------------------------

def origin(job: Job) -> int:
    """The job's time origin on the wall-clock base: the first GPU operation (else NVTX range) of any process."""
    for column in ("kernels", "ranges"):
        firsts = [int(getattr(t, column).start.min()) + (p.clock.offset_ns or 0) for p, t in job.traced()
                  if len(getattr(t, column).start)]
        if firsts:
            return min(firsts)
    return 0


def shift_of(p: JobProcess, origin_ns: int) -> int:
    """What to add to the process's timestamps to be on the job's base, from its origin."""
    return (p.clock.offset_ns or 0) - origin_ns


def summarize(job: Job, analyses: tuple[Analysis | None, ...]) -> JobSummary:
    t0 = origin(job)
    lanes, ranks, calls = [], [], {}
    for p, a in zip(job.processes, analyses):
        if a is None:
            continue
        shift, mask = shift_of(p, t0), collective_mask(a.trace)
        k = a.trace.kernels
        for s in a.streams:
            if s.kernels == 0:  # a stream of copies only (gloo's): lanes are where kernels ran
                continue
            n = int((mask & (k.device == s.device) & (k.stream == s.stream)).sum())
            lanes.append(JobLane(label=f"{p.label} GPU {s.device} stream {s.stream}", process=p.label, rank=p.rank, device=s.device, stream=s.stream,
                                 kernels=s.kernels, collectives=n, busy_ns=s.busy_ns))
        if len(k):
            ranks.append(rank_steps(p, a, shift))
        calls[p.label] = process_collectives(p, a.trace, shift)
    first = match_collectives(calls, None)
    clock = clock_check(job, first)
    matched = match_collectives(calls, clock.error_ns)
    return JobSummary(origin_unix_ns=t0, lanes=tuple(lanes), ranks=tuple(ranks), collectives_per_process={k: len(v) for k, v in calls.items() if v},
                      collectives=matched, clock=clock)


def require_kernels(job: Job) -> None:
    """A job in which no process left a trace with kernels has nothing to judge: an error (exit 6)
    naming how each process ended, never an empty analysis that would read as clean."""
    if any(len(t.kernels) for _, t in job.traced()):
        return
    ways = ", ".join(f"{p.label} {p.outcome.value}" + (" (no kernels)" if p.traced else "") for p in job.processes)
    raise TraceFormatError(f"{job.run_dir}: no process of the job left a trace with kernels ({ways}): "
                           "nothing to analyse, its ordering and hazards are unknown")


def analyze_job(job: Job, pairs: PairSpec, hazards: bool = True) -> JobAnalysis:
    """Every traced process analysed on its own with the same pairs (a process without kernels has
    none to pair), then the job summary. A pair glob that matches nothing in a process with kernels
    is the usage error of `analyze`, named by the process; a job without any kernel is an error."""
    require_kernels(job)
    analyses: list[Analysis | None] = []
    for p, t in zip(job.processes, job.traces):
        if t is None:
            analyses.append(None)
            continue
        try:
            analyses.append(analyze(t, pairs if len(t.kernels) else PairSpec(PairMode.NONE), hazards=hazards))
        except UsageError as exc:
            raise UsageError(f"{p.label} ({p.file}): {exc}") from exc
    empty = [p.label for p, t in job.traced() if len(t.kernels) == 0]
    notes = (f"traced without kernels (nothing to judge): {', '.join(empty)}",) if empty else ()
    return JobAnalysis(job=job, analyses=tuple(analyses), summary=summarize(job, tuple(analyses)), pair_spec=pairs, notes=notes)
