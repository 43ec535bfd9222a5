"""`tracer diff A B`: two runs of one kind compared (the JSON contract is docs/diff.md).

    diff_paths(a: Path, b: Path, *, pairs: PairSpec | None = None, hazards: bool = True,
               alpha: float = 0.05, seed: int = 0, targets: tuple[str, str] | None = None) -> Diff
    diff_artifacts(a: Artifact, b: Artifact, **same options) -> Diff
    Diff.to_json() -> dict   # {"schema": 2, "kind": "diff", "compared": ..., "a": ..., "b": ..., ...}; stable, versioned
    Diff.failures(new_hazard=False, new_finding=False, regression_pct=None) -> list[str]  # gates; [] passes

Kinds: a trace (file or run directory: nsys SQLite, tracer SQLite, Kineto JSON), a job (a run
directory with procs/, or a folder of Kineto traces), a sanitize report, a campaign store or
ablation JSON, a profile run. Two inputs of different kinds are a UsageError naming both. `pairs` None: A's recorded pair spec, else
tracer's default; the same spec judges both sides. `targets`: profile runs only, the target
(variant) label taken from A and from B. Errors are TracerErrors (UsageError for two kinds,
TraceFormatError for unreadable input); nothing is printed. The sides are read and analysed one
after the other, each reduced to what the diff keeps and its traces dropped before the next is read:
peak memory is about one analysis (reading B while A was analysed took 1.9x the memory of one and
more CPU, for the two cores it kept busy; docs/benchmarks.md).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracer.artifact import Artifact, CampaignRun, JobRun, NcuRun, SanitizeRun, TraceRun, open_artifact
from tracer.compare.layout import StepLayout, step_layout
from tracer.compare.samples import pooled, trace_samples
from tracer.compare.timing import ALPHA, KeyKind, Samples, compare_samples, range_key
from tracer.compare.verdicts import (compare_cells,
                                     compare_findings, compare_hazards, compare_pairs)
from tracer.compare.result import WORDS, Diff, DiffKind, Side
from tracer.errors import UsageError
from tracer.analysis.analyze import Analysis, PairVerdict
from tracer.analysis.hazards import Hazards, joined_coverage
from tracer.analysis.pairs import PairSpec

KIND_OF = {TraceRun: DiffKind.TRACE, JobRun: DiffKind.JOB, SanitizeRun: DiffKind.SANITIZE, CampaignRun: DiffKind.CAMPAIGN,
           NcuRun: DiffKind.PROFILE}

def kind_of(art: Artifact) -> DiffKind:
    return KIND_OF[type(art)]


def diff_paths(a: Path, b: Path, *, pairs: PairSpec | None = None, hazards: bool = True, alpha: float = ALPHA,
               seed: int = 0, targets: tuple[str, str] | None = None) -> Diff:
    same = a.resolve() == b.resolve()
    art_a = open_artifact(a)
    return diff_artifacts(art_a, art_a if same else open_artifact(b), pairs=pairs, hazards=hazards, alpha=alpha, seed=seed,
                          targets=targets)


def diff_artifacts(a: Artifact, b: Artifact, *, pairs: PairSpec | None = None, hazards: bool = True, alpha: float = ALPHA,
                   seed: int = 0, targets: tuple[str, str] | None = None) -> Diff:
    """`targets`: profile runs only, the target (variant) label to take from A and from B."""
    ka, kb = kind_of(a), kind_of(b)
    if ka is not kb:
        raise UsageError(f"cannot diff {a.path} ({WORDS[ka]}) against {b.path} ({WORDS[kb]}): give two inputs of one kind")
    if targets is not None:
        if not isinstance(a, NcuRun) or not isinstance(b, NcuRun):
            raise UsageError(f"--targets picks targets of profile runs, not of {WORDS[ka]}")
        a, b = _target(a, targets[0]), _target(b, targets[1])
    if isinstance(a, (TraceRun, JobRun)):
        return _diff_traces(a, b, pairs, hazards, alpha, seed)  # type: ignore[arg-type]  # kind_of() narrowed both; mypy cannot see it
    if isinstance(a, SanitizeRun):
        return _diff_sanitize(a, b, alpha)  # type: ignore[arg-type]  # kind_of() narrowed both; mypy cannot see it
    if isinstance(a, CampaignRun):
        return _diff_campaign(a, b, alpha)  # type: ignore[arg-type]  # kind_of() narrowed both; mypy cannot see it
    return _diff_profile(a, b, alpha, seed)  # type: ignore[arg-type]  # kind_of() narrowed both; mypy cannot see it


# ---- traces and jobs --------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class _Reduced:
    """What the diff keeps of one side once its traces are dropped: per process its samples, listed
    pairs, hazards and (the first process's) step layout."""

    side: Side
    labels: tuple[str, ...]  # traced processes ("" for a single trace)
    samples: Samples
    pairs: tuple[PairVerdict, ...]
    pair_counts: dict[str, int]
    hazards: tuple[Hazards | None, ...]
    layout: StepLayout | None


def _reduce(run: TraceRun | JobRun, spec: PairSpec, hazards: bool) -> _Reduced:
    from tracer.analysis.analyze import analyze
    from tracer.analysis.job_summary import analyze_job, kernel_steps

    if isinstance(run, TraceRun):
        an = analyze(run.load(), spec, hazards=hazards, streams=False)
        found: tuple[tuple[str, Analysis], ...] = (("", an),)
        notes, complete = tuple(an.warnings), not an.trace.record_errors
    else:
        ja = analyze_job(run.load(), spec, hazards)
        found = tuple((p.label, x) for p, x in zip(ja.job.processes, ja.analyses, strict=True) if x is not None)
        notes = tuple(ja.incomplete_lines())
        complete = not ja.incomplete and not any(x.trace.record_errors for _, x in found)
    steps = [kernel_steps(x.trace, x) for _, x in found]
    counts: Counter[str] = Counter()
    for _, x in found:
        counts.update(x.pair_counts)
    side = Side(path=str(run.path), complete=complete, size=sum(len(x.trace.kernels) for _, x in found),
                steps=sum(len(s[0]) for s in steps), notes=notes)
    return _Reduced(side=side, labels=tuple(n for n, _ in found), samples=pooled([trace_samples(x, s) for (_, x), s in zip(found, steps)]),
                    pairs=tuple(p for _, x in found for p in x.pairs), pair_counts=dict(counts), hazards=tuple(x.hazards for _, x in found),
                    layout=_layout(found[0], steps[0]) if found else None)


def _layout(first: tuple[str, Any], steps: tuple[list[str], np.ndarray]) -> StepLayout:
    """The first traced process's representative step, named with its process (a job's rank)."""
    from dataclasses import replace

    lay = step_layout(first[1], steps)
    return replace(lay, step=f"{first[0]} {lay.step}".strip())


def _both(a: TraceRun | JobRun, b: TraceRun | JobRun, spec: PairSpec, hazards: bool) -> tuple[_Reduced, _Reduced]:
    """One side after the other, each side's traces dropped once reduced; a run against itself once."""
    ra = _reduce(a, spec, hazards)
    return ra, ra if a is b else _reduce(b, spec, hazards)


def _diff_traces(a: TraceRun | JobRun, b: TraceRun | JobRun, pairs: PairSpec | None, hazards: bool, alpha: float,
                 seed: int) -> Diff:
    spec = pairs if pairs is not None else PairSpec.from_args(None, default=a.pair_spec or b.pair_spec)
    xa, xb = _both(a, b, spec, hazards)
    timing = compare_samples(xa.samples, xb.samples, alpha, seed)
    haz = compare_hazards(_hazards(xa), _hazards(xb)) if hazards else None
    return Diff(kind=DiffKind.JOB if isinstance(a, JobRun) else DiffKind.TRACE, a=xa.side, b=xb.side, same_input=a is b,
                matching=_matching(xa, xb), pairs=compare_pairs(xa.pairs, xb.pairs), pair_counts=(xa.pair_counts, xb.pair_counts),
                hazards=haz, timing=timing, alpha=alpha, notes=_pair_notes(xa.pairs, xb.pairs, spec),
                layouts=(xa.layout, xb.layout) if xa.layout and xb.layout else None)


def _hazards(x: _Reduced) -> Hazards | None:
    """One side's hazards; a job's processes joined (None: a process was not judged)."""
    found = [h for h in x.hazards if h is not None]
    if not found or len(found) < len(x.hazards):
        return None
    if len(found) == 1:
        return found[0]
    counts: Counter[str] = Counter()
    for h in found:
        counts.update(dict(h.counts))
    return Hazards(memory=all(h.memory for h in found), unjudged=sum(h.unjudged for h in found),
                   counts=tuple(counts.items()), listed=tuple(y for h in found for y in h.listed),
                   coverage=joined_coverage([h.coverage for h in found]))


def _matching(a: _Reduced, b: _Reduced) -> str:
    procs = ""
    if len(a.labels) > 1 or len(b.labels) > 1:
        la, lb = set(a.labels), set(b.labels)
        procs = (f"processes pooled: A {len(la)}, B {len(lb)} traced" +
                 (f" (only in A: {', '.join(sorted(la - lb))})" if la - lb else "") +
                 (f" (only in B: {', '.join(sorted(lb - la))})" if lb - la else "") + "; ")
    if a.side.steps == b.side.steps and a.side.steps:
        steps = f"{a.side.steps} steps on each side, compared as distributions"
    elif a.side.steps or b.side.steps:
        steps = (f"steps do not line up (A {a.side.steps}, B {b.side.steps}): compared as distributions over the steps "
                 "each side has, never step by step")
    else:
        steps = "no step ranges: per-launch and per-range-instance distributions"
    return procs + steps + "; step numbers in range names pooled (step3/x -> step*/x)"


def _pair_notes(pa: Sequence[PairVerdict], pb: Sequence[PairVerdict], spec: PairSpec) -> tuple[str, ...]:
    return (f"pairs judged with --pairs {spec}; listed pairs only (--pairs all lists up to 200 per side)",) if pa or pb else ()


# ---- sanitize, campaign, profile ------------------------------------------------------------------

def _diff_sanitize(a: SanitizeRun, b: SanitizeRun, alpha: float) -> Diff:
    fd = compare_findings(a.runs, b.runs)
    sa, sb = (Side(path=str(r.path), complete=not any(u.startswith(n) for u in fd.unjudged), size=len(r.runs), steps=0,
                   notes=tuple(f"{u[2:]} (not judged)" for u in fd.unjudged if u.startswith(n))) for n, r in (("A", a), ("B", b)))
    return Diff(kind=DiffKind.SANITIZE, a=sa, b=sb, same_input=a is b, matching="findings matched by workload, tool, kind, "
                "kernel and source line; runs by workload and tool", findings=fd, alpha=alpha)


def _diff_campaign(a: CampaignRun, b: CampaignRun, alpha: float) -> Diff:
    sa, sb = (Side(path=str(r.path), complete=True, size=len(r.cells), steps=0,
                   notes=tuple(f"cell {e} has no trials" for e in r.empty)) for r in (a, b))
    return Diff(kind=DiffKind.CAMPAIGN, a=sa, b=sb, same_input=a is b, matching="cells matched by label",
                cells=compare_cells(a.cells, b.cells, alpha), alpha=alpha)


def _launch_samples(run: NcuRun) -> Samples:
    by: dict[tuple[KeyKind, str], list[float]] = {}
    for t in run.run.targets:
        for x in t.report.launches:
            if x.duration_ns is None:
                continue
            by.setdefault((KeyKind.KERNEL, x.name), []).append(x.duration_ns)
            if x.nvtx_leaf:
                by.setdefault((KeyKind.RANGE, range_key(x.nvtx_leaf)), []).append(x.duration_ns)
    return Samples({k: np.asarray(v, dtype=np.float64) for k, v in by.items()})


def _target(run: NcuRun, label: str) -> NcuRun:
    from dataclasses import replace

    from tracer.errors import unknown

    chosen = tuple(t for t in run.run.targets if t.label == label)
    if not chosen:
        raise unknown(f"target of {run.path}", label, [t.label for t in run.run.targets])
    return replace(run, path=Path(f"{run.path}[{label}]"), run=replace(run.run, targets=chosen))


def _diff_profile(a: NcuRun, b: NcuRun, alpha: float, seed: int) -> Diff:
    sa, sb = (Side(path=str(r.path), complete=True, size=sum(len(t.report.launches) for t in r.run.targets), steps=0)
              for r in (a, b))
    return Diff(kind=DiffKind.PROFILE, a=sa, b=sb, same_input=a.run is b.run, matching="launches pooled by kernel name and "
                "innermost NVTX range (ncu durations)", timing=compare_samples(_launch_samples(a), _launch_samples(b), alpha, seed),
                alpha=alpha)
