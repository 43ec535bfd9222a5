"""Draws a TimelineData (matplotlib Agg): NVTX lanes per CPU thread on top, one lane per (device,
stream), density strips, the kernels of pairs and hazards outlined on top, arrows, and a legend
below the axes listing only what is drawn. What to draw is decided in tracer.views.timeline_layout."""
from __future__ import annotations

from collections import Counter

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from tracer.views.timeline_layout import CHECK, EVENT, HAZARD, OTHER, Lane, Mark, RangeLane, Strip, TimelineData

FAMILY_COLORS = {"cast_transpose": "#1f77b4", "dgrad": "#ff7f0e", "wgrad": "#2ca02c", "amax_update": "#9467bd",
                 CHECK: "#dedede", OTHER: "#8c8c8c"}
PALETTE = ("#17becf", "#bcbd22", "#8c564b", "#e377c2", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
           "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5")  # no red: red is UNORDERED
ARROW_COLORS = {EVENT: "#444444", "same-stream": "#2ca02c", "event-ordered": "#1f77b4",
                "host-synchronized": "#9467bd", "unordered": "#d62728", HAZARD: "#e7298a"}
ARROW_NAMES = {EVENT: "event edge (record -> wait)", "unordered": "UNORDERED pair", HAZARD: "hazard"}
RANGE_COLORS = ("#e6d29e", "#cdb06a")
LANE_H = 0.8
CHECK_H = 0.35  # the detector's check kernels: a low bar, so the work they check stays visible
MAX_ARROW_HEADS = 300
MAX_LABELS = 300
CHAR_PX = 5.6  # width of one character at LABEL_SIZE, in pixels at 100 dpi
LABEL_SIZE = 7


def category_colors(names: tuple[str, ...]) -> list[str]:
    """Fixed colours for tracer's families, "other" and "check"; the palette for the rest."""
    free = [c for c in PALETTE if c not in {FAMILY_COLORS[n] for n in names if n in FAMILY_COLORS}]
    out = []
    for n in names:
        out.append(FAMILY_COLORS[n] if n in FAMILY_COLORS else free.pop(0) if free else "#bbbbbb")
    return out


def draw_timeline(data: TimelineData, size: tuple[float, float] = (16, 7)) -> Figure:
    fig = plt.figure(figsize=size, dpi=100, layout="constrained")
    ax = fig.add_subplot()
    colors = category_colors(data.categories)
    rows: list[tuple[float, str]] = []  # (centre y, tick label)
    y = 0.0
    for rl in data.range_lanes:  # CPU lanes on top
        _draw_range_lane(ax, rl, y, (data.window_us[1] - data.window_us[0]) / (size[0] * 100))
        rows.append((y + LANE_H / 2, rl.label))
        y += 1
    gpu_y = []
    for lane in data.lanes:
        _draw_lane(ax, lane, y, colors)
        gpu_y.append(y + LANE_H / 2)
        rows.append((y + LANE_H / 2, lane.label))
        y += 1
    for strip in data.strips:
        _draw_strip(ax, strip, y)
        rows.append((y + LANE_H / 2, strip.label))
        y += 1
    _draw_marks(ax, data.marks, gpu_y, colors)
    draw_arrows(ax, data, gpu_y)
    _axes(ax, data, rows, y)
    _titles(fig, data)
    subtitle = "\n".join((*wrap_parts(data.subtitle, size[0]), *wrap_parts(data.hint, size[0])))
    ax.set_title(subtitle, fontsize=9)  # drawn as plain text (tracer.views.plots.savefig)
    handles = legend_handles(data, colors)
    fig.legend(handles=handles, loc="outside lower center", ncol=legend_columns(handles, size[0]), fontsize=8, frameon=False)
    _label_bars(fig, ax, data, gpu_y)
    return fig


LABEL_GAP = 0.06  # of the window's width: about 90 px at the default size


def _titles(fig: Figure, data: TimelineData) -> None:
    """The title, and under it in red what it must warn of (a rank that died), never cut off."""
    if not data.alert:
        fig.suptitle(data.title, fontsize=12)
        return
    fig.suptitle(f"{data.title}\nWARNING: {data.alert}", fontsize=12, color="#b00000")


SUBTITLE_CHARS_PER_INCH = 14  # 9 pt DejaVu Sans at 100 dpi: about 7 px a character


def wrap_parts(text: str, width_in: float, sep: str = "  ·  ") -> list[str]:
    """Lines of at most the figure's width, broken between the parts of a subtitle (never inside one,
    unless a part alone is wider): nothing is cut off at the figure's edge."""
    width, lines, cur = max(40, int(width_in * SUBTITLE_CHARS_PER_INCH)), [], ""
    for part in text.split(sep):
        joined = f"{cur}{sep}{part}" if cur else part
        if cur and len(joined) > width:
            lines.append(cur)
            joined = part
        cur = joined
    return [*lines, cur] if cur else lines


def _axes(ax: Axes, data: TimelineData, rows: list[tuple[float, str]], height: float) -> None:
    ax.set_yticks([r[0] for r in rows], [r[1] for r in rows])
    ax.set_ylim(-0.2, max(height, 1))
    ax.invert_yaxis()
    ax.set_xlim(*data.window_us)
    unit, scale = data.unit
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / scale:g}"))
    ax.set_xlabel(f"time ({unit}) from {data.time_from}")


RANGE_ROWS = 16


def _draw_range_lane(ax: Axes, lane: RangeLane, y: float, px_us: float) -> None:
    """Nested ranges in rows; a white edge separates neighbours, except on bars a few pixels wide
    (the edge would hide them). Ranges nested deeper than RANGE_ROWS share the last row (a row of a
    lane split thousands of times is no pixel high, and each row is one matplotlib collection)."""
    levels = np.minimum(lane.depth, RANGE_ROWS - 1)
    depth = int(levels.max()) + 1 if len(levels) else 1
    h = LANE_H / depth
    for d in range(depth):
        for wide in (False, True):
            sel = (levels == d) & ((lane.width_us > 6 * px_us) == wide)
            edge = {"edgecolor": "white", "linewidth": 0.5} if wide and not lane.aggregated else {"edgecolor": "none"}
            ax.broken_barh(list(zip(lane.start_us[sel], lane.width_us[sel])), (y + d * h, h),
                           facecolors=RANGE_COLORS[d % 2], **edge)


def _draw_lane(ax: Axes, lane: Lane, y: float, colors: list[str]) -> None:
    if lane.mix is not None:
        _draw_mix(ax, lane, y, colors)
        return
    order = sorted(set(lane.category.tolist()), key=lambda c: _draw_rank(colors, c))
    for c in order:  # check first (low), then other, then the families or names
        sel = lane.category == c
        low = colors[c] == FAMILY_COLORS[CHECK]
        h = LANE_H * (CHECK_H if low else 1.0)
        ax.broken_barh(list(zip(lane.start_us[sel], lane.width_us[sel])), (y + LANE_H - h, h),
                       facecolors=colors[c], edgecolor="none")


def _draw_rank(colors: list[str], c: int) -> int:
    return 0 if colors[c] == FAMILY_COLORS[CHECK] else 1 if colors[c] == FAMILY_COLORS[OTHER] else 2


def _draw_mix(ax: Axes, lane: Lane, y: float, colors: list[str], rows: int = 40) -> None:
    """Each pixel column stacked by the share of busy time of each category (an RGBA image)."""
    mix = lane.mix
    assert mix is not None
    busy = mix.busy_us
    order = sorted(range(busy.shape[1]), key=lambda c: -_draw_rank(colors, c))  # families on top
    total = busy.sum(axis=1)
    share = busy[:, order] / np.maximum(total, 1e-12)[:, None]
    cum = np.cumsum(share, axis=1)
    frac = (np.arange(rows) + 0.5) / rows
    which = np.minimum((cum[None, :, :] < frac[:, None, None]).sum(axis=2), len(order) - 1)  # (rows, columns)
    palette = np.array([to_rgba(colors[c]) for c in order])
    img = palette[which]
    img[:, total <= 0, 3] = 0.0  # idle columns stay blank
    x1 = mix.x0_us + mix.col_us * busy.shape[0]
    ax.imshow(img, extent=(mix.x0_us, x1, y + LANE_H, y), aspect="auto", interpolation="antialiased", zorder=2)


def _draw_strip(ax: Axes, strip: Strip, y: float) -> None:
    counts = strip.counts.astype(np.float64)
    h = LANE_H * counts / max(counts.max(), 1.0)
    edges = strip.x0_us + strip.col_us * np.arange(len(counts) + 1)
    color = ARROW_COLORS.get(strip.kind, "#444444")
    ax.stairs(y + LANE_H - h, edges, baseline=y + LANE_H, fill=True, color=color, alpha=0.3, linewidth=0)
    ax.stairs(y + LANE_H - h, edges, baseline=None, color=color, linewidth=0.7)


def _draw_marks(ax: Axes, marks: tuple[Mark, ...], gpu_y: list[float], colors: list[str]) -> None:
    for m in marks:
        color = colors[m.category] if m.category < len(colors) else FAMILY_COLORS[OTHER]
        ax.add_patch(Rectangle((m.start_us, gpu_y[m.lane] - LANE_H / 2), m.width_us, LANE_H, facecolor=color,
                               edgecolor=ARROW_COLORS.get(m.kind, "#000000"), linewidth=1.6, zorder=4))


def draw_arrows(ax: Axes, data: TimelineData, gpu_y: list[float]) -> None:
    """Arrowheads while there are few; beyond MAX_ARROW_HEADS, one line collection per kind."""
    if len(data.arrows) <= MAX_ARROW_HEADS:
        bundles: dict[tuple[float, int], list[str]] = {}  # hazards into one consumer: one label, thin extra arrows
        for ar in data.arrows:
            y0, y1 = _ends(gpu_y[ar.lane0], gpu_y[ar.lane1])
            extra = ar.kind == HAZARD and (ar.x1_us, ar.lane1) in bundles
            note = ax.annotate("", xy=(ar.x1_us, y1), xytext=(ar.x0_us, y0), zorder=5,
                               arrowprops={"arrowstyle": "->", "color": ARROW_COLORS.get(ar.kind, "#444444"),
                                           "lw": 0.8 if extra else _arrow_width(ar.kind), "alpha": 0.5 if extra else 1.0,
                                           "linestyle": _arrow_style(ar.kind), "shrinkA": 0, "shrinkB": 0})
            if note.arrow_patch is not None:  # an edge from before the window stops at the axes, not in the labels
                note.arrow_patch.set_clip_box(ax.bbox)
            if ar.kind == HAZARD:
                bundles.setdefault((ar.x1_us, ar.lane1), []).append(ar.label.replace(" hazard", ""))
        _hazard_labels(ax, data, gpu_y, bundles)
        return
    for kind in dict.fromkeys(ar.kind for ar in data.arrows):
        segs = [tuple(zip((ar.x0_us, ar.x1_us), _ends(gpu_y[ar.lane0], gpu_y[ar.lane1]))) for ar in data.arrows
                if ar.kind == kind]
        ax.add_collection(LineCollection(segs, colors=ARROW_COLORS.get(kind, "#444444"), zorder=5,
                                         linewidths=_arrow_width(kind) * 0.7, linestyles=_arrow_style(kind)))


def bundle_label(kinds: list[str]) -> str:
    """'RAW' for one hazard; 'RAW, reuse x2' for three into one consumer."""
    counts = Counter(kinds)
    return ", ".join(k if n == 1 else f"{k} x{n}" for k, n in counts.items())


def _hazard_labels(ax: Axes, data: TimelineData, gpu_y: list[float], bundles: dict[tuple[float, int], list[str]]) -> None:
    """One label per consumer, beside the arrowheads; a label that would overlap one already placed on
    its lane (closer than LABEL_GAP of the window) is left out: the legend and --json still count it."""
    span = data.window_us[1] - data.window_us[0]
    placed: dict[int, list[float]] = {}
    for (x1, lane1), kinds in sorted(bundles.items()):
        if any(abs(x1 - x) < LABEL_GAP * span for x in placed.get(lane1, [])):
            continue
        placed.setdefault(lane1, []).append(x1)
        ax.text(x1, gpu_y[lane1] - LANE_H / 2 - 0.04, bundle_label(kinds), fontsize=7, color=ARROW_COLORS[HAZARD],
                ha="right", va="bottom", clip_on=True, zorder=6)


def _ends(y0: float, y1: float) -> tuple[float, float]:
    """From the producer lane's edge to the consumer lane's facing edge, so arrows do not cover the bars."""
    if y0 == y1:
        return y0, y1
    d = LANE_H / 2 if y1 > y0 else -LANE_H / 2
    return y0 + d, y1 - d


def _arrow_width(kind: str) -> float:
    return 2.0 if kind in ("unordered", HAZARD) else 0.8 if kind == EVENT else 1.2


def _arrow_style(kind: str) -> str:
    return "--" if kind == EVENT else "-." if kind == HAZARD else "-"


def legend_columns(handles: list, width_in: float) -> int:
    """As many columns as the longest label lets fit in the figure's width (8 pt text: about 5.5 px
    a character at 100 dpi, plus the handle)."""
    longest = max((len(h.get_label()) for h in handles), default=1)
    return max(1, min(len(handles), int(width_in * 100 * 0.95 // (45 + 5.5 * longest))))


def legend_handles(data: TimelineData, colors: list[str]) -> list:
    """Only what is drawn: categories present in the lanes or marks, arrow kinds, strips, marks."""
    used: set[int] = {m.category for m in data.marks}
    for lane in data.lanes:
        used |= set(lane.category.tolist())
        if lane.mix is not None:
            used |= {int(c) for c in np.nonzero(lane.mix.busy_us.sum(axis=0) > 0)[0]}
    handles: list = [Patch(color=colors[c], label=n) for c, n in enumerate(data.categories) if c in used]
    for kind in dict.fromkeys(ar.kind for ar in data.arrows):
        handles.append(Line2D([], [], color=ARROW_COLORS.get(kind, "#444444"), lw=_arrow_width(kind),
                              linestyle=_arrow_style(kind), label=ARROW_NAMES.get(kind, f"{kind} pair")))  # type: ignore[arg-type]  # a named matplotlib style
    for s in data.strips:
        handles.append(Patch(color=ARROW_COLORS.get(s.kind, "#444444"), label=s.label.split(":")[0] + " (count per pixel column)"))
    if data.marks:
        handles.append(Patch(facecolor="white", edgecolor=ARROW_COLORS["unordered"], lw=1.6,
                             label="kernels of drawn pairs and hazards (outlined, widened)"))
    return handles


def _label_bars(fig: Figure, ax: Axes, data: TimelineData, gpu_y: list[float]) -> None:
    """Names inside the bars wide enough to hold them (measured after the layout), at most MAX_LABELS."""
    from tracer.views.plots.savefig import plain_drawing

    with plain_drawing(fig):
        fig.draw_without_rendering()
    lo, hi = data.window_us
    px_per_us = ax.get_window_extent().width / max(hi - lo, 1e-9)
    todo: list[tuple[float, float, float, list[str]]] = []  # (x0, x1, y, candidate texts)
    y = 0.0
    for rl in data.range_lanes:
        depth = int(rl.depth.max()) + 1 if len(rl.depth) else 1
        h = LANE_H / depth
        for x, w, d, name in zip(rl.start_us, rl.width_us, rl.depth, rl.names):
            todo.append((x, x + w, y + (d + 0.5) * h, [name, name.rsplit("/", 1)[-1]]))
        y += 1
    for lane, yc in zip(data.lanes, gpu_y):
        for x, w, name in zip(lane.start_us, lane.width_us, lane.names):
            todo.append((x, x + w, yc, [name]))
    n = 0
    for x0, x1, yc, texts in todo:
        a, b = max(x0, lo), min(x1, hi)
        room = (b - a) * px_per_us - 6
        text = next((t for t in texts if len(t) * CHAR_PX <= room), None)
        if text is None and room >= 8 * CHAR_PX:
            text = texts[-1][: int(room // CHAR_PX) - 1] + "…"
        if text is None:
            continue
        ax.text((a + b) / 2, yc, text, ha="center", va="center", fontsize=LABEL_SIZE, clip_on=True,
                in_layout=False, zorder=6)
        n += 1
        if n >= MAX_LABELS:
            return


def save(fig: Figure, out: Path) -> Path:
    if out.suffix.lower() not in (".png", ".svg"):
        from tracer.errors import UsageError

        raise UsageError(f"output {out} must end in .png or .svg")
    from tracer.views.plots.savefig import savefig
    from tracer.store.atomic import atomic_output

    try:
        with atomic_output(out, make_folder=False) as tmp:
            savefig(fig, str(tmp), out.suffix[1:].lower())
    finally:
        plt.close(fig)
    return out
