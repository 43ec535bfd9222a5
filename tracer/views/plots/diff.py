"""The diff picture: A's representative step over B's on one time axis (ms from the step's first
kernel), one row per stream; bars coloured by what their NVTX range (or kernel) did between A and B."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tracer.compare.result import Diff
from tracer.compare.layout import StepLayout
from tracer.compare.timing import Change, KeyKind

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

COLORS = {Change.SLOWER: "#d62728", Change.FASTER: "#2ca02c", Change.NEW: "#ff7f0e", Change.GONE: "#9467bd"}
OTHER = "#9aa5b1"


def key_changes(d: Diff) -> dict[tuple[KeyKind, str], Change]:
    """Range and kernel keys whose time changed beyond noise (or that are new or gone)."""
    return {(t.kind, t.name): t.change for t in d.changed_timing if t.kind in (KeyKind.RANGE, KeyKind.KERNEL)}


def bar_change(changes: dict[tuple[KeyKind, str], Change], rng: str, kernel: str) -> Change:
    """The bar's range's change, else its kernel's."""
    return changes.get((KeyKind.RANGE, rng)) or changes.get((KeyKind.KERNEL, kernel)) or Change.WITHIN_NOISE


def _side(ax: Axes, lay: StepLayout, changes: dict[tuple[KeyKind, str], Change], title: str) -> None:
    from matplotlib.collections import PolyCollection

    boxes, colors = [], []
    for lane, s, e, rng, kern in zip(lay.lane.tolist(), lay.start.tolist(), lay.end.tolist(), lay.range, lay.kernel):
        x0, x1, y = s / 1e6, max(e, s + 1) / 1e6, lane
        boxes.append([(x0, y - 0.38), (x1, y - 0.38), (x1, y + 0.38), (x0, y + 0.38)])
        colors.append(COLORS.get(bar_change(changes, rng, kern), OTHER))
    ax.add_collection(PolyCollection(boxes, facecolors=colors, edgecolors=colors, linewidths=0.3))
    ax.set_yticks(range(len(lay.lanes)), lay.lanes)
    ax.set_ylim(len(lay.lanes) - 0.5, -0.5)
    ax.set_title(title, loc="left", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def draw_diff(d: Diff, size: tuple[float, float] = (14, 6)) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if d.layouts is None:
        from tracer.errors import UsageError

        raise UsageError(f"--plot draws traces and jobs, not a {d.kind.value} diff")
    la, lb = d.layouts
    changes = key_changes(d)
    fig, axes = plt.subplots(2, 1, figsize=size, dpi=100, sharex=True,
                             gridspec_kw={"height_ratios": [max(1, len(la.lanes)), max(1, len(lb.lanes))]})
    _side(axes[0], la, changes, f"A {d.a.path}: {la.step} ({la.span_ns / 1e6:.3f} ms, {len(la.kernel)} kernels)")
    _side(axes[1], lb, changes, f"B {d.b.path}: {lb.step} ({lb.span_ns / 1e6:.3f} ms, {len(lb.kernel)} kernels)")
    axes[1].set_xlim(0, max(la.span_ns, lb.span_ns, 1) / 1e6 * 1.02)
    axes[1].set_xlabel("ms from the step's first kernel (the step with the median GPU span on each side)")
    legend = [Patch(color=c, label=f"{ch.value} (beyond noise)" if ch in (Change.SLOWER, Change.FASTER) else ch.value)
              for ch, c in COLORS.items()] + [Patch(color=OTHER, label="within noise or unjudged")]
    fig.legend(handles=legend, loc="upper right", ncol=len(legend), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig
