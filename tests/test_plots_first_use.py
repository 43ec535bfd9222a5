"""Pictures as a new user met them (issue 30), rendered from real captures and measured: the job
timeline's warning that a rank died stays inside the figure at the default size, CPU lanes of short
ranges say so, short kernels are wide enough to see, and hazards into one kernel get one label."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from tests.conftest import DATA
from tracer.artifact import open_artifact
from tracer.views.plots.timeline import bundle_label, draw_timeline, wrap_parts
from tracer.analysis.pairs import PairSpec
from tracer.views.timeline_layout import MIN_BAR_PX, timeline_data

matplotlib.use("Agg")
KILLED = DATA / "jobs" / "ddp_nccl_killed"
HAZARDS = DATA / "hazards" / "planted_cross_stream.sqlite"


@pytest.fixture(scope="module")
def killed():
    run = open_artifact(KILLED)
    return timeline_data(run.analyze(PairSpec.from_args(["all"], None, None)))


def _inside(fig, artist) -> bool:
    fig.canvas.draw()
    box, page = artist.get_window_extent(), fig.bbox
    return box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1 and box.y1 <= page.y1 + 1


def test_partial_rank_is_warned_of_inside_the_default_figure(killed) -> None:
    assert killed.alert == "rank 1 PARTIAL"
    fig = draw_timeline(killed)
    title = fig._suptitle
    assert "WARNING: rank 1 PARTIAL" in title.get_text() and _inside(fig, title)
    subtitle = fig.axes[0].title
    assert "clocks aligned" in subtitle.get_text() and _inside(fig, subtitle)


def test_subtitle_wraps_between_parts() -> None:
    text = "  ·  ".join(["a" * 100, "b" * 100, "c" * 30])
    assert wrap_parts(text, 16) == ["a" * 100 + "  ·  " + "b" * 100, "c" * 30]
    assert wrap_parts(text, 8) == ["a" * 100, "b" * 100, "c" * 30]  # 112 characters a line


def test_cpu_lanes_of_short_ranges_say_so_and_bars_are_visible(killed) -> None:
    labels = [r.label for r in killed.range_lanes]
    short = [label for label in labels if label.endswith("short ranges)")]
    assert short and all("CPU thread" in label for label in short)
    px = (killed.window_us[1] - killed.window_us[0]) / 1600
    assert all(lane.width_us.min() >= MIN_BAR_PX * px * 0.99 for lane in killed.lanes if len(lane.width_us))
    assert all(r.width_us.min() >= MIN_BAR_PX * px * 0.99 for r in killed.range_lanes if len(r.width_us))


def test_hazards_into_one_kernel_get_one_label(tmp_path: Path) -> None:
    run = open_artifact(HAZARDS)
    data = timeline_data(run.analyze(PairSpec.from_args(None, None, None)))
    fig = draw_timeline(data)
    texts = [t.get_text() for t in fig.axes[0].texts if "RAW" in t.get_text() or "reuse" in t.get_text()]
    consumers = {(a.x1_us, a.lane1) for a in data.arrows if a.kind == "hazard"}
    assert len(texts) == len(consumers) == 2, texts
    assert sorted(texts) == ["RAW x2, reuse x2", "RAW x4, reuse x2"]
    assert bundle_label(["RAW"]) == "RAW" and bundle_label(["WAR", "reuse", "WAR"]) == "WAR x2, reuse"
