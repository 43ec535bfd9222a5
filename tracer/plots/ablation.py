"""Ablation chart: failure rate per variant with its 95% interval (Clopper-Pearson; one-sided
upper bound for zero failures)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tracer.campaign.stats import CellStats  # noqa: E402


def draw_ablation(cells: list[CellStats], title: str = "failure rate per variant (95% interval)") -> Figure:
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(cells) + 1.8), dpi=100)
    for i, c in enumerate(cells):
        color = "#d62728" if c.failures else "#2ca02c"
        ax.plot([c.lower, c.upper], [i, i], color=color, lw=3, solid_capstyle="butt")
        ax.plot([c.rate], [i], "o", color="black", ms=5)
        ax.text(max(c.upper, c.rate) + 0.005, i, f"{c.failures}/{c.trials}" + (" (upper bound)" if not c.failures else ""),
                va="center", fontsize=8)
    ax.set_yticks(range(len(cells)), [c.label for c in cells])
    ax.invert_yaxis()
    ax.set_xlim(0, max(0.05, max((c.upper for c in cells), default=0.05) * 1.25))
    ax.set_xlabel("failure rate per trial")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
