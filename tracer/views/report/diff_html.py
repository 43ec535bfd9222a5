"""`tracer diff --html`: the text summary, the tables of what changed and the picture, one page."""
from __future__ import annotations

from pathlib import Path

from tracer.compare.result import Diff
from tracer.compare.verdicts import HAZARD_KEY, Status
from tracer.views.report.diff_text import format_diff
from tracer.views.report.html import Report


def _num(x: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def diff_report(d: Diff) -> Report:
    rep = Report(f"tracer diff: {d.a.path} -> {d.b.path}")
    rep.add_text("Summary", format_diff(d))
    if d.layouts is not None:
        from tracer.views.plots.diff import draw_diff

        rep.add_figure("A over B", draw_diff(d), "A's representative step above B's; red: slower beyond noise, green: "
                                                 "faster, orange: new, purple: gone")
    if d.hazards is not None and d.hazards.rows:
        rep.add_table("Hazards", ["status", *HAZARD_KEY, "A", "B"], [[r.status.value, *r.key, r.a, r.b] for r in d.hazards.rows],
                      ["unordered" if r.status is Status.NEW else "" for r in d.hazards.rows])
    if d.findings is not None and d.findings.rows:
        rep.add_table("Sanitizer findings", ["status", "workload", "tool", "kind", "kernel", "source", "A", "B"],
                      [[r.status.value, *r.key, r.a, r.b] for r in d.findings.rows])
    if d.timing:
        rows = [[t.change.value, t.kind.value, t.name, t.n_a, t.n_b, _num(t.median_a_ns), _num(t.median_b_ns),
                 _num(t.percent, "{:+.1f}%"), "-" if t.ci_low is None else f"{t.ci_low:.3f}..{t.ci_high:.3f}",
                 _num(t.p_holm, "{:.2g}")] for t in d.timing]
        rep.add_table("Time per step, range and kernel", ["change", "kind", "name", "n A", "n B", "median A ns", "median B ns",
                                                          "change", "95% CI of ratio", "p (Holm)"], rows,
                      ["unordered" if t.change.value == "slower" else "" for t in d.timing])
    return rep


def write_diff_html(d: Diff, out: Path) -> Path:
    return diff_report(d).write(out)
