"""Variants side by side: per group the median of each metric over its launches, and against a
baseline the deltas and the stall reason that grew most. Pure: records in, frozen summaries out."""
from __future__ import annotations

import fnmatch
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from tracer.errors import TraceFormatError, UsageError, unknown
from tracer.ncu.records import FIELDS, MEMBAR, Launch
from tracer.ncu.profile_json import ProfileRun

DEFAULT_BASELINE = "none"  # the fence-free variant
LAUNCH_METRICS = tuple(FIELDS)  # duration_ns, dram_pct, l2_pct, occupancy_pct, ipc, cycles_per_issue


class GroupBy(str, Enum):
    AUTO = "auto"  # label when the run has several targets, else the NVTX range, else the kernel name
    LABEL = "label"
    NVTX = "nvtx"
    KERNEL = "kernel"


@dataclass(frozen=True, kw_only=True)
class Summary:
    group: str
    launches: int
    duration_ns: float | None
    dram_pct: float | None
    l2_pct: float | None
    occupancy_pct: float | None
    ipc: float | None
    cycles_per_issue: float | None
    stalls: tuple[tuple[str, float], ...]  # median warp cycles per issued instruction, by reason
    shares: tuple[tuple[str, float], ...]  # median share of all stall reasons, by reason

    @property
    def membar_share(self) -> float | None:
        return dict(self.shares).get(MEMBAR) if self.shares else None


@dataclass(frozen=True, kw_only=True)
class Delta:
    group: str
    baseline: str
    duration_pct: float | None  # % change of the median duration
    dram_pts: float | None  # percentage points of peak
    l2_pts: float | None
    occupancy_pts: float | None
    ipc: float | None  # absolute change
    membar_share_pts: float | None  # percentage points of all stalls
    grew_most: str | None  # the stall reason whose cycles per issued instruction grew most
    grew_by: float | None


@dataclass(frozen=True, kw_only=True)
class Comparison:
    baseline: str | None
    summaries: tuple[Summary, ...]
    deltas: tuple[Delta, ...]
    clock_control: str | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def summary(self, group: str) -> Summary:
        for s in self.summaries:
            if s.group == group:
                return s
        raise unknown("group", group, [s.group for s in self.summaries])


def _median(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summarize(group: str, launches: Sequence[Launch]) -> Summary:
    reasons = sorted({r for launch in launches for r, _ in launch.stalls})
    per_launch = [dict(launch.stalls) for launch in launches]
    shares = [launch.shares() for launch in launches]
    return Summary(group=group, launches=len(launches), **{f: _median(getattr(x, f) for x in launches) for f in LAUNCH_METRICS},
                   stalls=tuple((r, _median(s.get(r) for s in per_launch)) for r in reasons),  # type: ignore[misc]  # _median is float | None; a reason listed has a value in some launch
                   shares=tuple((r, _median(s.get(r) for s in shares)) for r in reasons))  # type: ignore[misc]  # _median is float | None; a reason listed has a value in some launch


def _sub(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def delta(s: Summary, base: Summary) -> Delta:
    dur = None if s.duration_ns is None or not base.duration_ns else 100 * (s.duration_ns / base.duration_ns - 1)
    bs, ss = dict(base.stalls), dict(s.stalls)
    growth = {r: ss.get(r, 0.0) - bs.get(r, 0.0) for r in set(bs) | set(ss)} if bs and ss else {}
    top = max(sorted(growth), key=lambda r: growth[r]) if growth else None
    top = top if top is not None and growth[top] > 0 else None  # nothing grew: no reason to name
    mb = _sub(s.membar_share, base.membar_share)
    return Delta(group=s.group, baseline=base.group, duration_pct=dur, dram_pts=_sub(s.dram_pct, base.dram_pct), l2_pts=_sub(s.l2_pct, base.l2_pct),
                 occupancy_pts=_sub(s.occupancy_pct, base.occupancy_pct), ipc=_sub(s.ipc, base.ipc),
                 membar_share_pts=None if mb is None else 100 * mb, grew_most=top, grew_by=growth.get(top) if top else None)


def select(launches: Iterable[Launch], kernel: str | None = None, nvtx: str | None = None) -> list[Launch]:
    """Launches whose name matches the regex `kernel` and whose innermost NVTX range matches the glob `nvtx`."""
    try:
        pat = re.compile(kernel) if kernel else None
    except re.error as exc:
        raise UsageError(f"--kernel {kernel!r} is not a regular expression ({exc})") from None
    return [x for x in launches if (pat is None or pat.search(x.name))
            and (nvtx is None or (x.nvtx_leaf is not None and fnmatch.fnmatchcase(x.nvtx_leaf, nvtx)))]


def groups(runs: Sequence[ProfileRun], by: GroupBy, kernel: str | None = None, nvtx: str | None = None) -> dict[str, list[Launch]]:
    targets = [t for r in runs for t in r.targets]
    if by is GroupBy.AUTO:
        has_nvtx = any(x.nvtx for t in targets for x in t.report.launches)
        by = GroupBy.LABEL if len(targets) > 1 else (GroupBy.NVTX if has_nvtx else GroupBy.KERNEL)
    labels = [t.label for t in targets]
    if by is GroupBy.LABEL and len(set(labels)) != len(labels):
        raise UsageError(f"the runs share target labels ({', '.join(sorted(labels))}): compare them one run at a time")
    out: dict[str, list[Launch]] = {}
    for t in targets:
        for x in select(t.report.launches, kernel, nvtx):
            key = {GroupBy.LABEL: t.label, GroupBy.NVTX: x.nvtx_leaf or "(no NVTX range)", GroupBy.KERNEL: x.name}[by]
            out.setdefault(key, []).append(x)
    if not out:
        raise UsageError(f"no launch left after the selection (--kernel {kernel!r}, --range {nvtx!r})")
    return out


def compare(grouped: Mapping[str, Sequence[Launch]], baseline: str | None = DEFAULT_BASELINE,
            clock_control: str | None = None) -> Comparison:
    summaries = tuple(summarize(g, launches) for g, launches in grouped.items())
    notes = []
    if baseline is not None and baseline not in grouped:
        if baseline != DEFAULT_BASELINE:
            raise unknown("baseline", baseline, list(grouped))
        baseline = summaries[0].group
        notes.append(f"no group named {DEFAULT_BASELINE!r}: the baseline is the first, {baseline!r}")
    base = next((s for s in summaries if s.group == baseline), None)
    deltas = tuple(delta(s, base) for s in summaries if base is not None and s is not base)
    return Comparison(baseline=baseline, summaries=summaries, deltas=deltas, clock_control=clock_control, notes=tuple(notes))


def run_clock_control(runs: Sequence[ProfileRun]) -> tuple[str | None, tuple[str, ...]]:
    """The clock control the runs share, and a note when they differ (durations then do not compare)."""
    seen = sorted({r.clock_control or "unknown" for r in runs})
    if len(seen) == 1:
        return (None if seen[0] == "unknown" else seen[0]), ()
    return None, (f"the runs used different clock control ({', '.join(seen)}): their durations do not compare",)


def compare_runs(runs: Sequence[ProfileRun], baseline: str | None = DEFAULT_BASELINE, by: GroupBy = GroupBy.AUTO,
                 kernel: str | None = None, nvtx: str | None = None) -> Comparison:
    """Run directories (tracer.ncu.profile_json.load_run) -> their comparison, clock control checked."""
    clock, notes = run_clock_control(runs)
    c = compare(groups(runs, by, kernel, nvtx), baseline, clock)
    return replace(c, notes=c.notes + notes)



@dataclass(frozen=True)
class Agreement:
    """Two readings of the same launches side by side (see `agreement`)."""

    launches: int
    max_relative: tuple[tuple[str, float], ...]  # metric -> largest |x - y| / max(|x|, |y|); inf: one side lacks it
    max_absolute: tuple[tuple[str, float], ...]  # metric -> largest |x - y|
    renamed: tuple[tuple[str, str], ...]  # kernel names spelled differently (e.g. another demangler)

    @property
    def worst(self) -> tuple[str, float]:
        return max(self.max_relative, key=lambda kv: kv[1], default=("", 0.0))


def agreement(a: Sequence[Launch], b: Sequence[Launch]) -> Agreement:
    """Two readings of the same launches (a .ncu-rep through ncu-report, its CSV export, a stored
    profile.json), launch by launch: TraceFormatError when ids, grids or blocks differ."""
    ident = [[(x.id, x.grid, x.block) for x in side] for side in (a, b)]
    if ident[0] != ident[1]:
        first = next((f"{p} vs {q}" for p, q in zip(*ident) if p != q), f"{len(a)} vs {len(b)} launches")
        raise TraceFormatError(f"not the same launches (id, grid, block): {first}")
    rel: dict[str, float] = {}
    diff: dict[str, float] = {}
    for x, y in zip(a, b):
        sx, sy = dict(x.stalls), dict(y.stalls)
        pairs = [(f, getattr(x, f), getattr(y, f)) for f in LAUNCH_METRICS]
        for name, u, v in pairs + [(f"stall {r}", sx.get(r), sy.get(r)) for r in sorted(set(sx) | set(sy))]:
            r, d = _difference(u, v)
            rel[name], diff[name] = max(rel.get(name, 0.0), r), max(diff.get(name, 0.0), d)
    renamed = tuple(dict.fromkeys((x.name, y.name) for x, y in zip(a, b) if x.name != y.name))
    return Agreement(len(a), tuple(rel.items()), tuple(diff.items()), renamed)


def _difference(u: float | None, v: float | None) -> tuple[float, float]:
    if u is None or v is None:
        return (0.0, 0.0) if u is v else (math.inf, math.inf)
    scale = max(abs(u), abs(v))
    return (abs(u - v) / scale if scale else 0.0), abs(u - v)
