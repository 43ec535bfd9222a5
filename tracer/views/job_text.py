"""The text a person reads after `trace analyze` on a job: what is missing first, then the
processes and how each ended, the clocks, the collectives and their stragglers, per rank and step
the kernels, busy time and largest gap, and each process's own verdicts (labelled by rank)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.textsafe import lines_text
from tracer.analysis.analyze import Analysis
from tracer.format.procs import Outcome
from tracer.views.trace_text import format_analysis

if TYPE_CHECKING:  # a single trace's text needs neither the job reader nor its summary
    from tracer.analysis.job_summary import Clock, JobAnalysis, JobSummary

SHOWN_COLLECTIVES = 10
SHOWN_STEPS = 12


def us(ns: int | None) -> str:
    return "?" if ns is None else f"{ns / 1e3:.1f} us"


def ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def process_lines(ja: JobAnalysis) -> list[str]:
    lines = [f"processes ({len(ja.job.processes)}):"]
    width = max(len(p.how) for p in ja.job.processes)
    for p, t in zip(ja.job.processes, ja.job.traces):
        kernels = len(t.kernels) if t is not None else p.kernels
        what = {Outcome.COMPLETE: f"complete trace, {kernels} kernels" if kernels else "traced, no kernels",
                Outcome.PARTIAL: f"PARTIAL trace, {kernels} kernels ({p.note})",
                Outcome.NO_TRACE: f"NO TRACE ({p.note})", Outcome.NO_CUDA: "no CUDA use: nothing to trace",
                Outcome.STILL_RUNNING: "still running: no trace"}[p.outcome]
        lines.append(f"  {p.label:<10} {p.file:<24} {p.how:<{width}}  {what}")
    lines += [f"  untraced: pid {u.get('pid')} {' '.join(map(str, u.get('cmdline') or [u.get('comm', '?')]))[:80]}"
              for u in ja.job.untraced]
    return lines


def clock_lines(c: Clock) -> list[str]:
    offsets = ", ".join(f"{k} {us(v)}" for k, v in c.offsets_ns.items())
    checked = (f"the same collective ends {us(c.end_spread_median_ns)} apart at the median (max "
               f"{us(c.end_spread_max_ns)}, {c.collectives_checked} collectives)" if c.collectives_checked
               else "no collective on several ranks to check them against")
    pairs = (f"the clock pairs agree to {us(c.pairs_error_ns)}" if c.pairs_error_ns is not None
             else "the clock pairs cannot bound it (a process has fewer than two)")
    lines = [f"clocks: CUPTI -> wall clock per process (offsets {offsets or 'none'}); {pairs}; {checked}",
             f"alignment error: {us(c.error_ns) if c.error_ns is not None else 'UNKNOWN'} ({c.basis})"]
    if c.residual_ns and c.collectives_checked:
        lines.append("  collective ends vs the median, per rank: " + ", ".join(f"{k} {us(v)}" for k, v in c.residual_ns.items()))
    return lines + [f"  note: {n}" for n in c.notes]


def collective_lines(s: JobSummary) -> list[str]:
    if not s.collectives_per_process:
        return ["collectives: none (no NCCL kernel in any process: gloo or MPI on the CPU, or no communication)"]
    per = ", ".join(f"{k} {n}" for k, n in s.collectives_per_process.items())
    lines = [f"collectives (NCCL kernels): {per}; {len(s.collectives)} matched across ranks (the k-th of each)"]
    if len(s.collectives_per_process) < 2:
        lines.append("  one process ran collectives: no straggler to tell (the others left no trace, or ran none)")
    elif len(set(s.collectives_per_process.values())) > 1:
        lines.append("  the ranks ran different numbers of collectives: only the first "
                     f"{len(s.collectives)} of each are matched (a rank stopped early, or its trace is partial)")
    mixed = sum(c.op == "mixed" for c in s.collectives)
    if mixed:
        lines.append(f"  {mixed} matched collectives disagree on the operation across ranks (op 'mixed'): "
                     "the ranks did not run the same sequence, or several communicators interleave")
    for label, st in s.stragglers().items():
        if st["last"]:
            lines.append(f"  straggler {label}: last into {st['last']} of {len(s.collectives)}, late by "
                         f"{us(st['late_median_ns'])} at the median, {us(st['late_max_ns'])} at most")
    worst = sorted(s.collectives, key=lambda c: -c.late_ns)[:SHOWN_COLLECTIVES]
    for c in worst:
        streams = ", ".join(f"{x.process} stream {x.stream}" for x in c.calls)
        unsure = " (within the clock error)" if c.within_error else ""
        lines.append(f"  #{c.index} {c.op}: {c.straggler} started last, {us(c.late_ns)} after the first{unsure}; "
                     f"ends spread {us(c.end_spread_ns)}; on {streams}")
    return lines


def step_lines(s: JobSummary) -> list[str]:
    lines = [f"per rank and step:  {'kernels':>8} {'busy ms':>10} {'span ms':>10} {'largest gap ms':>15}"]
    for r in s.ranks:
        for st in r.steps[:SHOWN_STEPS]:
            lines.append(f"  {r.process:<8} {st.step[:16]:<16} {st.kernels:>8} {ms(st.busy_ns):>10} {ms(st.span_ns):>10} "
                         f"{ms(st.largest_gap_ns):>15}")
        if len(r.steps) > SHOWN_STEPS:
            lines.append(f"  {r.process:<8} ... {len(r.steps) - SHOWN_STEPS} more steps (--json lists all)")
    lanes = ", ".join(f"{x.label} ({x.kernels})" for x in s.lanes)
    return lines + [f"lanes (kernels): {lanes or 'none'}"]


def format_job(ja: JobAnalysis) -> str:
    missing = ja.incomplete_lines()
    ranks = sorted({p.rank for p in ja.job.processes if p.rank is not None})
    head = [f"job {ja.job.run_dir}: {len(ja.job.processes)} processes ({len(ranks)} ranks), "
            f"{sum(len(t.kernels) for _, t in ja.job.traced())} kernels"]
    head += [f"JOB INCOMPLETE: {line}" for line in missing]
    parts = head + process_lines(ja) + clock_lines(ja.summary.clock) + collective_lines(ja.summary) + step_lines(ja.summary)
    parts += [f"note: {n}" for n in ja.notes]
    for p, a in zip(ja.job.processes, ja.analyses):
        if a is not None and len(a.trace.kernels):
            parts += [f"== {p.label} ({p.file}) ==", *format_analysis(a).split("\n")]
    lost = [p.label for p in ja.incomplete if not p.traced]
    partial = [p.label for p in ja.incomplete if p.traced]
    if lost:
        parts.append(f"not analysed, verdicts UNKNOWN: {', '.join(lost)}")
    if partial:
        parts.append(f"partial traces, verdicts cover only what was flushed before the process died: {', '.join(partial)}")
    return lines_text(parts)


def format_result(a: Analysis | JobAnalysis) -> str:
    """The text of one trace's analysis or of a job's."""
    return format_analysis(a) if isinstance(a, Analysis) else format_job(a)
