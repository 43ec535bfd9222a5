"""The HTML report's sections, one kind of artifact at a time: a trace's verdicts (UNORDERED
first, as in the CLI and the JSON), streams, top kernels and timeline; a job's processes and how
each ended, clocks, collectives and stragglers, steps per rank, its timeline of every rank and
each process's verdicts; the sanitizer matrix and
findings; a campaign's chart and trials (cells without trials say so); a `tracer profile` run's
warp-stall and throughput chart and its medians."""
from __future__ import annotations

import json
from collections.abc import Sequence

from tracer.artifact import Artifact, CampaignRun, JobRun, NcuRun, SanitizeRun, TraceRun
from tracer.views.report.html import Report
from tracer.sanitize.model import ToolRun
from tracer.analysis.analyze import MAX_LISTED_PAIRS, Analysis, analyze, top_kernels
from tracer.analysis.job_summary import JobAnalysis
from tracer.model.trace import Trace
from tracer.analysis.ordering import Verdict
from tracer.analysis.pairs import PairSpec
from tracer.views.trace_text import counts_text, edge_text, operations_text

MAX_FINDINGS_PER_RUN = 20


def trace_analysis(run: TraceRun, pairs: PairSpec | None = None) -> Analysis:
    """The run analysed with the given pairs, else the pairs its verdict was made with, else all
    (the rule of `trace analyze`: hazards instead where the trace has memory access sets)."""
    return analyze(run.load(), pairs or PairSpec.from_args(None, default=run.pair_spec))


def add_trace(rep: Report, name: str, run: TraceRun, a: Analysis, timeline_range: str | None) -> None:
    from tracer.views.plots.timeline import draw_timeline
    from tracer.views.timeline_layout import timeline_data

    if run.environment is not None:
        rep.add_text(f"environment ({name})", json.dumps(run.environment, indent=1))
    add_verdicts(rep, name, a)
    if a.hazards is not None:  # what was judged and what was not, one line per kind left unjudged
        rep.add_text(f"hazards: {name}", "\n".join(a.hazards.text_lines()))
    rep.add_table(f"streams: {name}", ["device", "stream", "kernels", "operations", "busy (ms)", "idle (ms)", "max gap (ms)"],
                  [[s.device, s.label if s.raw_stream is not None else s.stream, s.kernels, s.operations, f"{s.busy_ns / 1e6:.3f}",
                    f"{s.idle_ns / 1e6:.3f}",
                    f"{s.max_gap_ns / 1e6:.3f}"] for s in a.streams])
    rep.add_table(f"kernels with the most GPU time: {name}", ["kernel", "launches", "total (ms)"],
                  [[k, n, f"{ns / 1e6:.3f}"] for k, n, ns in top_kernels(a.trace)])
    rep.add_figure(f"stream timeline: {name}", draw_timeline(timeline_data(a, range_regex=timeline_range)),
                   f"{operations_text(a.trace)}; {a.attribution.unattributed} unattributed; "
                   f"pairs: {counts_text(a.pair_counts)}")
    add_time(rep, name, a)


def add_time(rep: Report, name: str, a: Analysis) -> None:
    """Where the time went (tracer.analysis.explain): overlap, idle gaps by cause, critical paths."""
    from tracer.analysis.explain import explain

    if len(a.trace.kernels):
        rep.add_text(f"where the time went: {name}", "\n".join(explain(a).text_lines()))


def short_stream(trace: Trace, key: int) -> str:
    """`7`, or `pid 1234 stream 7` in a trace of several processes."""
    return trace.stream_label(key) if trace.multi_process else str(key)


def add_verdicts(rep: Report, name: str, a: Analysis) -> None:
    pairs = sorted(a.pairs, key=lambda p: -p.verdict.severity)[:MAX_LISTED_PAIRS]  # UNORDERED first
    rep.add_table(f"ordering verdicts: {name}", ["producer", "consumer", "streams", "verdict", "ordered by", "gap (us)"],
                  [[p.producer, p.consumer, f"{short_stream(a.trace, p.producer_stream)} -> {short_stream(a.trace, p.consumer_stream)}",
                    p.verdict.value.upper() if p.verdict is Verdict.UNORDERED else p.verdict.value,
                    edge_text(p.edge, a.trace) if p.edge else "-", f"{p.gap_ns / 1e3:.1f}"] for p in pairs],
                  [p.verdict.value for p in pairs])


def add_job(rep: Report, name: str, run: JobRun, ja: JobAnalysis, timeline_range: str | None) -> None:
    """A job: what is missing first, the processes, clocks, collectives, steps, the timeline of every
    rank, then each traced process's verdicts and hazards (labelled by rank)."""
    from tracer.views.plots.timeline import draw_timeline
    from tracer.views.job_text import clock_lines, collective_lines
    from tracer.views.timeline_layout import job_timeline_data

    s = ja.summary
    if ja.incomplete:
        rep.add_text(f"JOB INCOMPLETE: {name}", "\n".join(ja.incomplete_lines()))
    if run.environment is not None:
        rep.add_text(f"environment ({name})", json.dumps(run.environment, indent=1))
    rep.add_table(f"processes: {name}", ["process", "file", "how it ended", "outcome", "kernels", "note"],
                  [[p.label, p.file, p.how, p.outcome.value, len(t.kernels) if t is not None else p.kernels, p.note]
                   for p, t in zip(ja.job.processes, ja.job.traces)])
    rep.add_text(f"clocks and collectives: {name}", "\n".join(clock_lines(s.clock) + collective_lines(s)))
    if s.collectives:
        rep.add_table(f"collectives: {name}", ["#", "op", "started last", "late (us)", "ends spread (us)", "within clock error"],
                      [[c.index, c.op, c.straggler, f"{c.late_ns / 1e3:.1f}", f"{c.end_spread_ns / 1e3:.1f}",
                        "yes" if c.within_error else "no"] for c in s.collectives[:MAX_LISTED_PAIRS]])
    rep.add_table(f"per rank and step: {name}", ["process", "step", "kernels", "busy (ms)", "span (ms)", "largest gap (ms)"],
                  [[r.process, x.step, x.kernels, f"{x.busy_ns / 1e6:.3f}", f"{x.span_ns / 1e6:.3f}",
                    f"{x.largest_gap_ns / 1e6:.3f}"] for r in s.ranks for x in r.steps])
    if any(a is not None and len(a.trace.kernels) for a in ja.analyses):
        rep.add_figure(f"stream timeline: {name}", draw_timeline(job_timeline_data(ja, range_regex=timeline_range)),
                       f"lanes per (rank, device, stream) on the aligned time base; {len(s.lanes)} lanes")
    for p, a in zip(ja.job.processes, ja.analyses):
        if a is not None and len(a.trace.kernels):
            add_verdicts(rep, f"{name} {p.label}", a)
            if a.hazards is not None:
                rep.add_text(f"hazards: {name} {p.label}", "\n".join(a.hazards.text_lines()))
            add_time(rep, f"{name} {p.label}", a)


def add_campaign(rep: Report, name: str, run: CampaignRun) -> None:
    from tracer.views.plots.ablation import draw_ablation

    caption = f"cells without trials yet: {', '.join(run.empty)}" if run.empty else ""
    if run.cells:
        rep.add_figure(f"ablation: {name}", draw_ablation(list(run.cells)), caption)
    rows = [[c.label, f"{c.failures}/{c.trials}", f"{c.rate:.4f}",
             f"[{c.lower:.4f}, {c.upper:.4f}]" + (" one-sided" if c.one_sided else "")] for c in run.cells]
    rows += [[label, "no trials", "-", "-"] for label in run.empty]
    rep.add_table("trials", ["variant", "failures / trials", "rate", "95% interval"], rows)


def add_profile(rep: Report, name: str, run: NcuRun) -> None:
    """A `tracer profile` run: its warp-stall and throughput chart and its table of medians."""
    from tracer.ncu.compare import compare_runs
    from tracer.views.plots.ncu import report_parts

    parts = report_parts(compare_runs([run.run]))
    rep.add_figure(f"{parts.figure_title}: {name}", parts.figure, parts.caption)
    rep.add_table(f"{parts.table_title}: {name}", parts.header, parts.rows)


def add_sanitizer(rep: Report, runs: Sequence[ToolRun]) -> None:
    from tracer.views.plots.verdicts import draw_verdicts

    rep.add_figure("sanitizer verdicts", draw_verdicts(list(runs)))
    rep.add_table("sanitizer findings", ["tool", "workload", "verdict", "kind", "kernel", "source", "count"],
                  [[r.tool.value, r.workload, r.verdict.value, f.kind, f.kernel, f.source, f.count]
                   for r in runs for f in r.findings[:MAX_FINDINGS_PER_RUN]])


def build_report(artifacts: Sequence[Artifact], title: str, timeline_range: str | None = None,
                 pairs: PairSpec | None = None) -> Report:
    rep = Report(title)
    runs: list[ToolRun] = []
    for art in artifacts:
        if isinstance(art, TraceRun):
            add_trace(rep, art.path.name, art, trace_analysis(art, pairs), timeline_range)
        elif isinstance(art, JobRun):
            add_job(rep, art.path.name, art, art.analyze(pairs or PairSpec.from_args(None, default=art.pair_spec)),
                    timeline_range)
        elif isinstance(art, SanitizeRun):
            runs += art.runs
        elif isinstance(art, NcuRun):
            add_profile(rep, art.path.name, art)
        else:
            add_campaign(rep, art.path.name, art)
    if runs:
        add_sanitizer(rep, runs)
    return rep
