"""Sanitizer verdict matrix: tool x workload (or variant) cells coloured by verdict."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from tracer.sanitize.model import SanVerdict, Tool, ToolRun  # noqa: E402

VERDICT_COLORS = {"clean": "#4daf4a", "errors": "#e41a1c", "suppressed": "#a6d96a", "target-failed": "#ff7f00",
                  "tool-failed": "#984ea3", "timeout": "#777777", "incomplete": "#fdbf6f", "no-errors-recorded": "#c7c7c7",
                  "missing": "#ffffff"}


def cell_state(run: ToolRun) -> tuple[str, str]:
    """(colour key, text) of one run."""
    n = sum(f.count for f in run.findings)
    sup = sum(f.count for _, f in run.suppressed)
    if run.verdict is SanVerdict.CLEAN and sup:
        return "suppressed", f"clean\n({sup} suppressed)"
    if run.verdict is SanVerdict.ERRORS:
        return "errors", f"errors\n{n}"
    if run.verdict is SanVerdict.TARGET_FAILED and run.errors_found:
        return "target-failed", f"target-failed\n+ {n} errors"
    return run.verdict.value, run.verdict.value


def _row(run: ToolRun) -> str:
    return run.workload + (f" [{run.filter}]" if run.filter == "on" else "")


def draw_verdicts(runs: list[ToolRun], title: str = "compute-sanitizer verdicts") -> Figure:
    tools = [t.value for t in Tool]
    rows = list(dict.fromkeys(_row(r) for r in runs))
    cell = {(_row(r), r.tool.value): cell_state(r) for r in runs}
    fig, ax = plt.subplots(figsize=(2.2 * len(tools) + 3, 0.7 * len(rows) + 1.6), dpi=100)
    for i, row in enumerate(rows):
        for j, tool in enumerate(tools):
            key, text = cell.get((row, tool), ("missing", "-"))
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=VERDICT_COLORS[key], edgecolor="white", lw=2))
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=8,
                    color="white" if key in ("errors", "tool-failed", "timeout") else "black")
    ax.set_xlim(0, len(tools))
    ax.set_ylim(len(rows), 0)
    ax.set_xticks([j + 0.5 for j in range(len(tools))], tools)
    ax.set_yticks([i + 0.5 for i in range(len(rows))], rows)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    used = {cell_state(r)[0] for r in runs}
    ax.legend(handles=[Patch(color=VERDICT_COLORS[k], label=k) for k in VERDICT_COLORS if k in used],
              loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=6, fontsize=8, frameon=False)
    ax.set_title(title, pad=24)
    fig.tight_layout()
    return fig
