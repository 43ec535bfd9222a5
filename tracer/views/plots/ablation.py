"""Ablation chart: failure rate per variant with its 95% interval (Clopper-Pearson; one-sided
upper bound for zero failures). The rate axis stays within [0, 1]; failures/trials are written in
a column right of the axes."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from tracer.campaign.stats import CellStats


def rate_limit(cells: list[CellStats]) -> float:
    """The right end of the rate axis: the largest upper bound with a 10% margin, at least 0.05, at most 1."""
    return min(1.0, max(0.05, max((c.upper for c in cells), default=0.0) * 1.1))


MAX_SHOWN = 60  # variants drawn; beyond, those with the highest upper bound (the most failure-prone)


def shown_cells(cells: list[CellStats]) -> tuple[list[CellStats], str]:
    """The variants to draw and what the title adds: all of them while few, else the MAX_SHOWN with
    the highest upper bound (a row per variant would make a picture thousands of inches tall)."""
    if len(cells) <= MAX_SHOWN:
        return cells, ""
    picked = sorted(range(len(cells)), key=lambda i: (-cells[i].upper, -cells[i].rate, i))[:MAX_SHOWN]
    return [cells[i] for i in picked], f"\n{MAX_SHOWN} of {len(cells):,} variants shown: highest upper bound first"


def draw_ablation(cells: list[CellStats], title: str = "failure rate per variant (95% interval)") -> Figure:
    cells, note = shown_cells(cells)
    title += note
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(cells) + 1.8), dpi=100, layout="constrained")
    right = blended_transform_factory(ax.transAxes, ax.transData)
    for i, c in enumerate(cells):
        color = "#d62728" if c.failures else "#2ca02c"
        ax.plot([c.lower, c.upper], [i, i], color=color, lw=3, solid_capstyle="butt")
        ax.plot([c.rate], [i], "o", color="black", ms=5)
        ax.text(1.01, i, f"{c.failures}/{c.trials}" + (" (upper bound)" if not c.failures else ""),
                transform=right, va="center", fontsize=8)
    ax.text(1.01, 1.0, "failures/trials", transform=ax.transAxes, va="bottom", fontsize=8)
    ax.set_yticks(range(len(cells)), [c.label for c in cells])
    ax.invert_yaxis()
    ax.set_xlim(0, rate_limit(cells))
    ax.set_xlabel("failure rate per trial")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return fig
