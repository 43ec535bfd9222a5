"""Draws a TimelineData (matplotlib Agg): one lane per (device, stream), NVTX lanes per CPU
thread, event edges and producer -> consumer pairs as arrows, UNORDERED pairs in red."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from tracer.trace.timeline import FAMILIES, TimelineData  # noqa: E402

COLORS = {"cast_transpose": "#1f77b4", "dgrad": "#ff7f0e", "wgrad": "#2ca02c", "amax_update": "#9467bd",
          "check": "#d9d9d9", "other": "#7f7f7f"}
ARROW_COLORS = {"event": "#444444", "same-stream": "#2ca02c", "event-ordered": "#1f77b4",
                "host-synchronized": "#9467bd", "unordered": "#d62728"}
LANE_H = 0.8
MAX_ARROW_HEADS = 300


def draw_timeline(data: TimelineData, size: tuple[float, float] = (16, 7)) -> Figure:
    n_gpu, n_cpu = len(data.lanes), len(data.range_lanes)
    fig, ax = plt.subplots(figsize=size, dpi=100)
    y = 0.0
    ticks, labels = [], []
    for lane in data.range_lanes:  # CPU lanes on top
        depth = int(lane.depth.max()) + 1 if len(lane.depth) else 1
        h = LANE_H / depth
        ax.broken_barh(list(zip(lane.start_us, lane.width_us)), (y, h), facecolors="#e0c98c", edgecolor="none")
        for d in range(1, depth):
            sel = lane.depth == d
            ax.broken_barh(list(zip(lane.start_us[sel], lane.width_us[sel])), (y + d * h, h),
                           facecolors="#c9a95c", edgecolor="none")
        ticks.append(y + LANE_H / 2)
        labels.append(f"{lane.label} (NVTX)")
        y += 1
    gpu_y = []
    for lane in data.lanes:
        for f, name in enumerate(FAMILIES):
            sel = lane.family == f
            if sel.any():
                ax.broken_barh(list(zip(lane.start_us[sel], lane.width_us[sel])), (y, LANE_H),
                               facecolors=COLORS[name], edgecolor="none")
        gpu_y.append(y + LANE_H / 2)
        ticks.append(y + LANE_H / 2)
        labels.append(lane.label + (f" ({lane.kernels} kernels, aggregated)" if lane.aggregated else f" ({lane.kernels} kernels)"))
        y += 1
    draw_arrows(ax, data, gpu_y)
    ax.set_yticks(ticks, labels)
    ax.set_ylim(-0.2, max(y, 1))
    ax.invert_yaxis()
    ax.set_xlim(*data.window_us)
    ax.set_xlabel("time (us) from the first kernel")
    ax.set_title(f"stream timeline: {data.title}  ({n_gpu} GPU lanes, {n_cpu} CPU lanes)")
    handles = [Patch(color=COLORS[f], label=f) for f in FAMILIES]
    kinds = sorted({ar.kind for ar in data.arrows})
    handles += [Patch(color=ARROW_COLORS.get(k, "#444444"), label=f"arrow: {k}") for k in kinds]
    ax.legend(handles=handles, loc="upper right", fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def draw_arrows(ax, data: TimelineData, gpu_y: list[float]) -> None:  # type: ignore[no-untyped-def]
    """Arrowheads while there are few; beyond MAX_ARROW_HEADS, one line collection per kind."""
    from matplotlib.collections import LineCollection

    if len(data.arrows) <= MAX_ARROW_HEADS:
        for ar in data.arrows:
            ax.annotate("", xy=(ar.x1_us, gpu_y[ar.lane1]), xytext=(ar.x0_us, gpu_y[ar.lane0]),
                        arrowprops={"arrowstyle": "->", "color": ARROW_COLORS.get(ar.kind, "#444444"),
                                    "lw": 2.0 if ar.kind == "unordered" else 0.8,
                                    "linestyle": "-" if ar.kind != "event" else "--"})
        return
    for kind in sorted({ar.kind for ar in data.arrows}):
        segs = [((ar.x0_us, gpu_y[ar.lane0]), (ar.x1_us, gpu_y[ar.lane1])) for ar in data.arrows if ar.kind == kind]
        ax.add_collection(LineCollection(segs, colors=ARROW_COLORS.get(kind, "#444444"),
                                         linewidths=1.5 if kind == "unordered" else 0.5))


def save(fig: Figure, out: Path) -> Path:
    if out.suffix.lower() not in (".png", ".svg"):
        from tracer.errors import UsageError

        raise UsageError(f"output {out} must end in .png or .svg")
    from tracer.store.atomic import atomic_output

    try:
        with atomic_output(out) as tmp:
            fig.savefig(tmp, format=out.suffix[1:])
    finally:
        plt.close(fig)
    return out
