"""Nsight Compute pictures: per group (variant) the warp-stall breakdown as stacked bars and the
throughput as % of peak; and the parts the HTML report embeds. Plots only draw: they take a
Comparison (tracer.ncu.compare) and read nothing."""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tracer.ncu.compare import Comparison
from tracer.ncu.records import MEMBAR
from tracer.views.plots.savefig import plain_drawing

TOP_REASONS = 7  # the rest stack as "other"
MEMBAR_COLOR, OTHER_COLOR = "#d62728", "#bbbbbb"
# tab20 without its reds and greys (membar's and "other"'s), so that a reason keeps its colour from chart to chart
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5")
REASON_ORDER = ("long_scoreboard", "barrier", "short_scoreboard", "wait", "not_selected", "selected", "no_instruction",
                "math_pipe_throttle", "mio_throttle", "lg_throttle", "drain", "imc_miss", "branch_resolving",
                "dispatch_stall", "tex_throttle", "misc")  # ncu's stall reasons, the usual large ones first
THROUGHPUT = (("DRAM", "dram_pct", "#1f77b4"), ("L2", "l2_pct", "#ff7f0e"), ("achieved occupancy", "occupancy_pct", "#2ca02c"))


def stall_reasons(c: Comparison, top: int = TOP_REASONS) -> list[str]:
    """The reasons with the largest share in any group; membar always among them when present."""
    best: dict[str, float] = {}
    for s in c.summaries:
        for r, v in s.shares:
            best[r] = max(best.get(r, 0.0), v)
    ranked = sorted(best, key=lambda r: (-best[r], r))[:top]
    if MEMBAR in best and MEMBAR not in ranked:
        ranked[-1] = MEMBAR
    return ranked


def reason_colors(reasons: list[str]) -> dict[str, str]:
    """A fixed colour per reason (membar red, "other" grey); a reason without one gets a colour no
    reason of this chart has."""
    fixed = dict(zip(REASON_ORDER, PALETTE))
    colors = {MEMBAR: MEMBAR_COLOR, "other": OTHER_COLOR} | {r: fixed[r] for r in reasons if r in fixed}
    free = iter(c for c in PALETTE if c not in colors.values())
    return {r: colors.get(r) or next(free, OTHER_COLOR) for r in [*reasons, "other"]}


def draw_stalls(ax: Axes, c: Comparison) -> None:
    reasons = stall_reasons(c)
    names = [s.group for s in c.summaries]
    left = [0.0] * len(names)
    colors = reason_colors(reasons)
    for r in [*reasons, "other"]:
        vals = [100 * (dict(s.shares).get(r, 0.0) if r != "other" else
                       max(0.0, 1 - sum(v for k, v in s.shares if k in reasons)) if s.shares else 0.0)
                for s in c.summaries]
        ax.barh(names, vals, left=left, color=colors[r], label=r, edgecolor="white", linewidth=0.5)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("% of warp stall cycles (median over launches)")
    ax.set_title("warp stall breakdown")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, frameon=False)


def draw_throughput(ax: Axes, c: Comparison) -> None:
    names = [s.group for s in c.summaries]
    h = 0.8 / len(THROUGHPUT)
    for i, (label, attr, color) in enumerate(THROUGHPUT):
        ys = [j + (i - 1) * h for j in range(len(names))]
        vals = [getattr(s, attr) or 0.0 for s in c.summaries]
        ax.barh(ys, vals, height=h, color=color, label=label)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of peak (median over launches)")
    ax.set_title("throughput")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)


def draw_comparison(c: Comparison) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 2.2 + 0.45 * len(c.summaries)), dpi=100)
    draw_stalls(left, c)
    draw_throughput(right, c)
    fig.suptitle(f"Nsight Compute, clock control {c.clock_control or 'unknown'}", fontsize=10)
    with plain_drawing(fig):
        fig.tight_layout()
    return fig


@dataclass(frozen=True, kw_only=True)
class ReportParts:
    """What the HTML report shows for a profile run: one figure and one table."""

    figure_title: str
    figure: Figure
    caption: str
    table_title: str
    header: list[str]
    rows: list[list[object]]


def report_parts(c: Comparison) -> ReportParts:
    def f(v: float | None, fmt: str) -> str:
        return "?" if v is None else format(v, fmt)

    deltas = {d.group: d for d in c.deltas}
    rows: list[list[object]] = []
    for s in c.summaries:
        d = deltas.get(s.group)
        rows.append([s.group, s.launches, f(None if s.duration_ns is None else s.duration_ns / 1e3, ".2f"),
                     f(s.dram_pct, ".1f"), f(s.l2_pct, ".1f"), f(s.occupancy_pct, ".1f"), f(s.ipc, ".2f"),
                     f(None if s.membar_share is None else 100 * s.membar_share, ".2f"),
                     f(d.duration_pct, "+.1f") if d else "baseline", (d.grew_most or "?") if d else ""])
    header = ["group", "launches", "duration us", "DRAM %", "L2 %", "occupancy %", "issued IPC", "membar % of stalls",
              f"duration vs {c.baseline} %", "stall that grew most"]
    caption = (f"Medians over each group's launches; clock control {c.clock_control or 'unknown'}. "
               "Stall shares are each reason's part of all warp stall cycles per issued instruction.")
    return ReportParts(figure_title="Nsight Compute: warp stalls and throughput", figure=draw_comparison(c), caption=caption,
                       table_title="Nsight Compute per variant", header=header, rows=rows)
