"""Variants side by side: medians per group, deltas against the baseline, the stall that grew most;
and the pictures and report parts drawn from a comparison."""
from __future__ import annotations

import pytest

from tests.conftest import DATA
from tracer.errors import UsageError
from tracer.ncu.compare import GroupBy, compare, groups, run_clock_control, select, summarize
from tracer.ncu.csvraw import read_csv
from tracer.ncu.records import Launch
from tracer.ncu.profile_json import ProfiledTarget, ProfileRun


def launch(i: int, dur: float | None, membar: float, wait: float = 2.0, dram: float | None = 50.0,
           nvtx: tuple[str, ...] = (), name: str = "cast_transpose") -> Launch:
    return Launch(id=i, name=name, nvtx=nvtx, grid=(256, 1, 1), block=(256, 1, 1), duration_ns=dur, dram_pct=dram, l2_pct=60.0, occupancy_pct=40.0,
                  ipc=0.5, cycles_per_issue=10.0,
                  stalls=(("long_scoreboard", 6.0), ("membar", membar), ("wait", wait)))


def test_medians_deltas_and_the_stall_that_grew_most() -> None:
    grouped = {"none": [launch(0, 10_000, 0.0), launch(1, 10_400, 0.0), launch(2, 30_000, 0.0)],
               "device_before_atomic": [launch(3, 11_000, 2.0), launch(4, 11_000, 2.0, dram=None)]}
    c = compare(grouped)
    none, fenced = c.summaries
    assert (none.launches, none.duration_ns, none.membar_share) == (3, 10_400, 0.0)  # the median: one slow launch does not move it
    assert fenced.duration_ns == 11_000 and fenced.dram_pct == 50.0  # a launch without DRAM counts only where it has one
    assert fenced.membar_share == pytest.approx(0.2)
    (d,) = c.deltas
    assert c.baseline == "none" and d.group == "device_before_atomic"
    assert d.duration_pct == pytest.approx(100 * (11_000 / 10_400 - 1)) and d.dram_pts == 0.0
    assert d.membar_share_pts == pytest.approx(20.0) and (d.grew_most, d.grew_by) == ("membar", 2.0)


def test_baseline_choice() -> None:
    grouped = {"a": [launch(0, 1.0, 0.0)], "b": [launch(1, 2.0, 0.0, wait=3.0)]}
    c = compare(grouped)
    assert c.baseline == "a" and "no group named 'none'" in c.notes[0] and c.deltas[0].grew_most == "wait"
    assert compare(grouped, "b").deltas[0].duration_pct == -50.0
    with pytest.raises(UsageError, match="unknown baseline 'c' \\(allowed: a, b\\)"):
        compare(grouped, "c")
    same = compare({"none": [launch(0, 1.0, 0.0)], "x": [launch(1, 1.0, 0.0)]})
    assert same.deltas[0].grew_most is None  # nothing grew: no reason named


def test_unknown_values_stay_unknown() -> None:
    s = summarize("x", [launch(0, None, 0.0, dram=None)])
    assert s.duration_ns is None and s.dram_pct is None
    d = compare({"none": [launch(0, None, 0.0)], "x": [launch(1, 5.0, 1.0)]}).deltas[0]
    assert d.duration_pct is None and d.membar_share_pts is not None


def run_of(*targets: tuple[str, list[Launch]], clock: str | None = "none") -> ProfileRun:
    from tracer.ncu.records import NcuReport, Source

    return ProfileRun("r", clock, tuple(ProfiledTarget(label=label, variant=label, report=NcuReport(path="p", source=Source.CSV, launches=tuple(xs)))
                                        for label, xs in targets))


def test_grouping_by_label_nvtx_and_kernel() -> None:
    one = run_of(("none", [launch(0, 1.0, 0.0, nvtx=("tracer@step0/layer0/mb0/cast_weight",)),
                           launch(1, 2.0, 0.0, nvtx=("tracer@step0/layer0/mb0/cast_transpose",), name="other")]))
    assert list(groups([one], GroupBy.AUTO)) == ["step0/layer0/mb0/cast_weight", "step0/layer0/mb0/cast_transpose"]
    assert list(groups([one], GroupBy.KERNEL)) == ["cast_transpose", "other"]
    assert list(groups([one], GroupBy.NVTX, nvtx="*/cast_transpose")) == ["step0/layer0/mb0/cast_transpose"]
    two = run_of(("none", [launch(0, 1.0, 0.0)]), ("x", [launch(1, 1.0, 0.0)]))
    assert list(groups([two], GroupBy.AUTO)) == ["none", "x"]
    with pytest.raises(UsageError, match="share target labels"):
        groups([two, two], GroupBy.LABEL)
    with pytest.raises(UsageError, match="no launch left after the selection"):
        groups([two], GroupBy.LABEL, kernel="^gemm")
    assert [x.name for x in select(one.targets[0].report.launches, kernel="^oth")] == ["other"]


def test_runs_with_other_clock_control_are_flagged() -> None:
    a, b = run_of(("none", []), clock="none"), run_of(("x", []), clock="base")
    assert run_clock_control([a, a]) == ("none", ())
    clock, notes = run_clock_control([a, b])
    assert clock is None and "different clock control (base, none)" in notes[0]


def test_pictures_and_report_parts_from_real_records() -> None:
    path = DATA / "ncu" / "triton_prog.raw.csv"
    if not path.is_file():
        pytest.skip(f"{path} not captured yet")
    from tracer.views.plots.ncu import report_parts, stall_reasons

    real = list(read_csv(path).launches)
    c = compare({"none": real[:1], "axpy": real[1:]}, clock_control="none")
    assert "membar" in stall_reasons(c, top=3)  # the fence stall is always drawn, even when small
    parts = report_parts(c)
    assert len(parts.figure.axes) == 2 and parts.figure.axes[0].get_title() == "warp stall breakdown"
    assert parts.header[0] == "group" and [r[0] for r in parts.rows] == ["none", "axpy"]
    assert parts.rows[0][2] == "44.77" and parts.rows[0][8] == "baseline" and "clock control none" in parts.caption


def test_each_stall_reason_keeps_one_colour_across_charts() -> None:
    """The fence tables at two sizes rank the reasons differently; a reason is drawn in the same colour
    in both, membar in red, and no two reasons of one chart share a colour."""
    from matplotlib.colors import to_hex

    from tracer.ncu.compare import compare_runs
    from tracer.ncu.profile_json import load_run
    from tracer.views.plots.ncu import MEMBAR_COLOR, draw_comparison

    charts = []
    for size in (4096, 8192):
        path = DATA / "ncu" / f"table-{size}" / "profile.json"
        if not path.is_file():
            pytest.skip(f"{path} not captured yet")
        stalls_ax = draw_comparison(compare_runs([load_run(path)], "none", GroupBy.LABEL)).axes[0]
        charts.append({b.get_label(): to_hex(b.patches[0].get_facecolor()) for b in stalls_ax.containers})
    for colours in charts:
        assert len(set(colours.values())) == len(colours) == 8 and colours["membar"] == MEMBAR_COLOR
    shared = set(charts[0]) & set(charts[1])
    assert {"long_scoreboard", "wait", "short_scoreboard"} <= shared
    assert [list(c) for c in charts][0] != [list(c) for c in charts][1]  # ranked differently...
    assert all(charts[0][r] == charts[1][r] for r in shared)  # ...coloured alike
