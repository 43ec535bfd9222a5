"""Sanitizer verdict matrix: tool x workload (or variant) cells coloured by what the run means
against the expectation. For a planted defect, the tool that must catch it is outlined and its cell
says "caught" (it found errors, even if the target failed afterwards) or "MISSED"; the other tools
on that workload are faded. A workload with no planted defect shows its verdict."""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tracer.sanitize.model import SanVerdict, Tool, ToolRun

TOOLS = tuple(t.value for t in Tool)
STATE_COLORS = {"caught": "#1a9850", "MISSED": "#d73027", "clean": "#a6d96a", "errors": "#f46d43",
                "target-failed": "#fdae61", "tool-failed": "#984ea3", "timeout": "#777777", "incomplete": "#fdbf6f",
                "no-errors-recorded": "#c7c7c7", "missing": "#ffffff"}
STATE_NAMES = {"caught": "caught: the expected tool found the planted defect", "MISSED": "MISSED by the expected tool",
               "clean": "clean", "errors": "errors found", "target-failed": "target failed (crash), no errors found",
               "tool-failed": "tool failed", "timeout": "timeout",
               "incomplete": "incomplete: no error read, but the run cannot be proven checked to the end",
               "no-errors-recorded": "no errors recorded: XML without its text output", "missing": "not run"}
DARK = {"caught", "MISSED", "tool-failed", "timeout"}
FADED_ALPHA = 0.45


def expected_tools() -> dict[str, str]:
    """Planted workload -> the tool that must catch it (the self-test's table)."""
    from tracer.sanitize.selftest import PLANTED

    return {w: t.value for w, t in PLANTED.items()}


@dataclass(frozen=True)
class Cell:
    state: str  # a key of STATE_COLORS
    text: str
    expected: bool  # this tool must catch this workload's planted defect
    faded: bool  # another tool's planted defect


def cell_state(run: ToolRun, expected: dict[str, str] | None = None) -> Cell:
    """What one run means against the expectation (expected: workload -> tool)."""
    expected = expected_tools() if expected is None else expected
    verdict, found = run.verdict.value, run.errors_found
    n = sum(f.count for f in run.findings)
    sup = sum(f.count for _, f in run.suppressed)
    must = expected.get(run.workload)
    crashed = run.verdict is SanVerdict.TARGET_FAILED
    if must is not None and must == run.tool.value:
        if found:
            return Cell("caught", f"✓ caught\n{n:,} errors" + ("\n(then the target failed)" if crashed else ""), True, False)
        return Cell("MISSED", f"✗ MISSED\n({verdict})", True, False)
    faded = must is not None
    if verdict == SanVerdict.CLEAN.value:
        return Cell("clean", "clean" + (f"\n({sup} suppressed)" if sup else ""), False, faded)
    if found:
        return Cell("errors", f"errors\n{n:,}" + ("\n(then the target failed)" if crashed else ""), False, faded)
    return Cell(verdict if verdict in STATE_COLORS else "tool-failed", verdict, False, faded)


def _row(run: ToolRun) -> str:
    return run.workload + (f" [filter {run.filter}]" if run.filter == "on" else "")


def draw_verdicts(runs: list[ToolRun], title: str = "compute-sanitizer verdicts",
                  expected: dict[str, str] | None = None) -> Figure:
    expected = expected_tools() if expected is None else expected
    rows = list(dict.fromkeys(_row(r) for r in runs))
    cells = {(_row(r), r.tool.value): cell_state(r, expected) for r in runs}
    fig, ax = plt.subplots(figsize=(2.2 * len(TOOLS) + 3, 0.75 * len(rows) + 2.0), dpi=100, layout="constrained")
    for i, row in enumerate(rows):
        for j, tool in enumerate(TOOLS):
            c = cells.get((row, tool), Cell("missing", "-", False, False))
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=STATE_COLORS[c.state], alpha=FADED_ALPHA if c.faded else 1.0,
                                       edgecolor="white", lw=2))
            if c.expected:
                ax.add_patch(plt.Rectangle((j + 0.04, i + 0.06), 0.92, 0.88, fill=False, edgecolor="black", lw=2.2))
            ax.text(j + 0.5, i + 0.5, c.text, ha="center", va="center", fontsize=8,
                    fontweight="bold" if c.expected else "normal",
                    color="white" if c.state in DARK and not c.faded else "black")
    ax.set_xlim(0, len(TOOLS))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(TOOLS))], TOOLS)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    used = list(dict.fromkeys(c.state for c in cells.values()))
    handles = [Patch(color=STATE_COLORS[k], label=STATE_NAMES[k]) for k in STATE_COLORS if k in used]
    if any(c.expected for c in cells.values()):
        handles.append(Patch(facecolor="white", edgecolor="black", lw=2, label="outlined: the tool that must catch the "
                                                                              "planted defect (other tools faded)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    ax.set_title(title, pad=12)
    return fig
