"""The stream timeline: what it shows (legend outside the data, only what is drawn, colours on
foreign traces, names in bars, the default view, units, titles), the pairs it draws (from the
analysis' own pairs, with `all` too), hazards through their adapter, and what it does at scale
(a column mix per lane, density strips). On the demo capture (H200), the shared nsys and Kineto
fixtures, and synthetic traces from scripts/make_synthetic_trace.py."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.colors import to_hex

from tests.conftest import shared_fixture
from tracer.cli import main
from tracer.errors import UsageError
from tracer.views.plots.timeline import CHECK_H, FAMILY_COLORS, LANE_H, draw_timeline, save
from tracer.analysis.analyze import Analysis, analyze
from tracer.readers.load import load_trace
from tracer.analysis.ordering import Verdict
from tracer.analysis.pairs import PairMode, PairSpec
from tracer.views.timeline_layout import (
    MARK_MIN_PX,
    MAX_ARROWS_PER_KIND,
    MAX_BARS_PER_LANE,
    arrows_from_hazards,
    column_busy,
    distinct_short_names,
    event_edges,
    make_frame,
    pair_kernels,
    pair_mode,
    short_name,
    timeline_data,
)
from tracer.analysis.selection import parse_window

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "tracer" / "data" / "demo" / "linear_backward_planted.sqlite"
PAIRS = [("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")]


@pytest.fixture(scope="module")
def globs() -> Analysis:
    return analyze(load_trace(DEMO), PAIRS)


@pytest.fixture(scope="module")
def every() -> Analysis:
    return analyze(load_trace(DEMO), None, all_kernel_pairs=True)


# ---- what the picture shows ------------------------------------------------------------------


def test_legend_sits_outside_the_axes(globs: Analysis) -> None:
    for data in (timeline_data(globs), timeline_data(globs, range_regex="^step1/")):
        fig = draw_timeline(data)
        fig.canvas.draw()
        legend, axes = fig.legends[0].get_window_extent(), fig.axes[0].get_window_extent()
        assert not legend.overlaps(axes) and legend.y1 <= axes.y0


def test_legend_lists_only_what_is_drawn(globs: Analysis) -> None:
    d = timeline_data(globs, range_regex="^step1/layer1/mb0/")
    fig = draw_timeline(d)
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    drawn = {d.categories[c] for lane in d.lanes for c in lane.category}
    assert {n for n in legend if n in d.categories} == drawn
    assert "amax_update" not in legend and "other" not in legend  # neither runs in step1/layer1/mb0


def test_foreign_nsys_trace_is_coloured_by_kernel_name() -> None:
    a = analyze(load_trace(shared_fixture("nsys", "h100_2gpu_1s.sqlite")))
    d = timeline_data(a)
    assert d.color_by == "kernel name"
    assert not set(d.categories) & {"cast_transpose", "dgrad", "wgrad", "amax_update", "check"}
    assert len(d.categories) == 9 and d.categories[-1] == "other"  # top 8 by GPU time, then the rest
    # copies are drawn as operations: the H2D and D2D copies take the most GPU time in this window, then the GEMMs
    assert d.categories[:2] == ("[memcpy HtoD]", "[memcpy DtoD]") and d.categories[2].startswith("sm80_xmma_gemm")
    assert len(set(d.categories)) == 9
    legend = {t.get_text() for t in draw_timeline(d).legends[0].get_texts()}
    assert d.categories[0] in legend and "cast_transpose" not in legend


def test_kineto_trace_names_bars_where_they_fit() -> None:
    a = analyze(load_trace(shared_fixture("kineto", "event_sync.json.gz")))
    d = timeline_data(a, window=(0.0, 1000.0))  # the whole trace: its memcpy now counts among the densest 80%
    assert d.color_by == "kernel name" and "spin_kernel" in d.categories and "[memcpy DtoH]" in d.categories
    fig = draw_timeline(d)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"spin_kernel", "ProfilerStep#100", "aten::sum"} <= texts  # kernel and NVTX bars with room
    fig.canvas.draw()
    ax = fig.axes[0].get_window_extent()
    for t in fig.axes[0].texts:
        box = t.get_window_extent()
        assert ax.x0 - 1 <= box.x0 and box.x1 <= ax.x1 + 1


def test_nvtx_names_drawn_in_the_demo(globs: Analysis) -> None:
    fig = draw_timeline(timeline_data(globs, range_regex="^step1/"))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "check" in texts and "step1/amax_update" in texts


def test_default_view_skips_the_warm_up_and_keeps_the_pairs(globs: Analysis, every: Analysis) -> None:
    whole = timeline_data(globs, window=(0, float("inf")))
    assert whole.window_us[0] == 0 and "--window" in whole.hint
    for a in (globs, every):
        d = timeline_data(a)
        lo, hi = d.window_us
        assert lo > 400_000 and hi == pytest.approx(whole.window_us[1], rel=1e-3)  # warm-up and step0 start cut
        unordered = [ar for ar in d.arrows if ar.kind == "unordered"]
        assert len(unordered) == 4 and all(lo <= ar.x0_us and ar.x1_us <= hi for ar in unordered)
        assert "densest 80% of kernels" in d.subtitle and "whole trace: --window 0:" in d.hint


def test_uniform_trace_is_shown_whole() -> None:
    d = timeline_data(analyze(load_trace(shared_fixture("nsys", "h100_2gpu_1s.sqlite"))))
    assert "(whole trace)" in d.subtitle and "whole trace:" not in d.hint


def test_axis_in_ms_when_the_span_is_large(globs: Analysis) -> None:
    d = timeline_data(globs, range_regex="^step1/")
    assert d.unit == ("ms", 1e3)
    fig = draw_timeline(d)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (ms) from the first GPU operation"
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert all(500 < float(t) < 600 for t in ticks)
    short = timeline_data(analyze(load_trace(shared_fixture("kineto", "event_sync.json.gz"))))
    assert short.unit == ("µs", 1.0)


def test_title_names_range_window_and_lane_counts(globs: Analysis) -> None:
    d = timeline_data(globs, range_regex="^step1/")
    assert d.title.endswith("(2 GPU lanes, 1 CPU lane)")
    assert "range '^step1/'" in d.subtitle and "window 563.7" in d.subtitle and " ms (" in d.subtitle
    assert "pairs globs: 4 UNORDERED in the trace, 2 drawn" in d.subtitle
    assert "zoom: --window 563.723ms:" in d.hint
    fig = draw_timeline(d)
    assert fig._suptitle.get_text() == d.title and d.subtitle in fig.axes[0].get_title()
    assert parse_window(d.hint.split("--window ")[1].split(" ")[0]) is not None  # the hint parses


def test_pair_kernels_stand_out_and_check_kernels_step_back(globs: Analysis) -> None:
    d = timeline_data(globs, range_regex="^step1/")
    px_us = (d.window_us[1] - d.window_us[0]) / (1600 * 0.8)
    kinds = {m.kind for m in d.marks}
    assert kinds == {"unordered"} and len(d.marks) == 4
    ends = {ar.producer for ar in d.arrows if ar.kind == "unordered"} | {ar.consumer for ar in d.arrows if ar.kind == "unordered"}
    assert {m.kernel for m in d.marks} == ends
    assert all(m.width_us >= MARK_MIN_PX * px_us * 0.999 for m in d.marks)
    assert {d.categories[m.category] for m in d.marks} == {"cast_transpose", "dgrad"}
    fig = draw_timeline(d)
    ax = fig.axes[0]
    outlined = [p for p in ax.patches if to_hex(p.get_edgecolor()) == "#d62728"]
    assert len(outlined) == 4 and all(p.get_zorder() > 2 for p in outlined)
    def heights(family: str) -> set[float]:
        cols = [c for c in ax.collections if len(c.get_facecolor()) and to_hex(c.get_facecolor()[0]) == FAMILY_COLORS[family]]
        return {round(p.get_extents().height, 6) for c in cols for p in c.get_paths()}

    assert heights("check") == {round(CHECK_H * LANE_H, 6)}  # the detector's kernels: low bars
    assert heights("dgrad") == {LANE_H} and heights("cast_transpose") == {LANE_H}


# ---- pairs -------------------------------------------------------------------------------------


def test_pairs_all_are_drawn_from_the_analysis(every: Analysis) -> None:
    assert pair_mode(every.pair_spec) == "all" and every.unordered == 4
    d = timeline_data(every)
    unordered = [a for a in d.arrows if a.kind == "unordered"]
    assert len(unordered) == 4 and {(a.lane0, a.lane1) for a in unordered} == {(0, 1)}
    assert not [a for a in d.arrows if a.kind == "event-ordered"]  # with `all`, the ordered ones are the lanes and edges
    k = every.trace.kernels
    for ar, p in zip(unordered, [p for p in every.pairs if p.verdict is Verdict.UNORDERED]):
        assert int(k.stream[ar.producer]) == p.producer_stream and int(k.stream[ar.consumer]) == p.consumer_stream
        assert every.trace.kernel_name(ar.consumer) == p.consumer_kernel
        assert int(k.start[ar.consumer] - k.end[ar.producer]) == p.gap_ns  # the very pair, not a look-alike


def test_pair_kernels_are_found_for_every_listed_pair(every: Analysis) -> None:
    listed = [p for p in every.pairs if p.producer_stream != p.consumer_stream][:300]
    found = pair_kernels(listed)
    k = every.trace.kernels
    assert all(f is not None for f in found)
    assert all(int(k.start[c] - k.end[p]) == pr.gap_ns for (p, c), pr in zip(found, listed))  # type: ignore[misc]  # found has no None, asserted on the line above


def test_pairs_carry_their_kernel_indices_and_are_drawn_from_them(globs: Analysis) -> None:
    k = globs.trace.kernels
    for p in globs.pairs:  # the analysis' own indices: the very kernels of the verdict
        assert (int(k.stream[p.producer_index]), int(k.stream[p.consumer_index])) == (p.producer_stream, p.consumer_stream)
        assert globs.trace.kernel_name(p.consumer_index) == p.consumer_kernel
    base = next(p for p in globs.pairs if p.verdict is Verdict.UNORDERED)
    p7, c13 = int(np.nonzero(k.stream == 7)[0][-1]), int(np.nonzero(k.stream == 13)[0][0])
    pair = dataclasses.replace(base, producer_index=p7, consumer_index=c13)
    a = dataclasses.replace(globs, pairs=(pair,))
    assert pair_kernels([pair]) == [(p7, c13)]
    assert pair_kernels([dataclasses.replace(base, producer_index=-1)]) == [None]  # not known: not drawn
    d = timeline_data(a, window=(0, float("inf")))
    (ar,) = [x for x in d.arrows if x.kind == "unordered"]
    frame = make_frame(a)
    assert (ar.producer, ar.consumer) == (p7, c13) and ar.x0_us == frame.end_us[p7]


def test_no_pairs_spec_draws_none(globs: Analysis) -> None:
    d = timeline_data(dataclasses.replace(globs, pair_spec=PairSpec(PairMode.NONE)))
    assert not [a for a in d.arrows if a.kind != "event"] and not d.marks
    assert timeline_data(globs, show_pairs=False).marks == ()
    assert pair_mode(globs.pair_spec) == "globs"


# ---- hazards -----------------------------------------------------------------------------------


def test_hazards_through_the_adapter(globs: Analysis) -> None:
    k = globs.trace.kernels
    rng, t = globs.attribution.range_of_kernel, globs.trace
    cast = [i for i in range(len(k)) if rng[i] >= 0 and t.strings[int(t.ranges.text[rng[i]])].endswith("/cast_transpose")]
    dgrad = [int(i) for i in np.nonzero(k.stream == 13)[0]]
    fake = [SimpleNamespace(kind="RAW", producer_index=cast[-1], consumer_index=dgrad[-1], may=False),
            SimpleNamespace(kind=SimpleNamespace(value="reuse"), producer_index=dgrad[0], consumer_index=cast[0], may=True),
            SimpleNamespace(kind="WAR", producer_index=len(k) + 5, consumer_index=0)]  # not a kernel: skipped
    frame = make_frame(globs)
    arrows = arrows_from_hazards(fake, frame)
    assert [a.label for a in arrows] == ["RAW hazard", "reuse hazard (may)"]
    assert arrows[0].lane0 == 0 and arrows[0].lane1 == 1 and arrows[0].x1_us == frame.start_us[dgrad[-1]]

    a = dataclasses.replace(globs, hazards=SimpleNamespace(listed=fake[:1]))
    d = timeline_data(a, show_pairs=True)
    assert [ar.kind for ar in d.arrows if ar.kind == "hazard"] == ["hazard"]
    assert "1 hazard listed" in d.subtitle
    assert {m.kernel for m in d.marks} >= {cast[-1], dgrad[-1]}  # a hazard's kernels are marked like a pair's
    fig = draw_timeline(d)
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "hazard" in legend and "UNORDERED pair" in legend
    assert "RAW" in {t.get_text() for t in fig.axes[0].texts}  # the hazard's kind beside its arrow


# ---- errors ------------------------------------------------------------------------------------


def test_window_parsing() -> None:
    assert parse_window("1000:5000") == (1000.0, 5000.0)
    assert parse_window("480ms:520ms") == (480_000.0, 520_000.0)
    assert parse_window(":0.5s") == (0.0, 500_000.0) and parse_window("10:") == (10.0, float("inf"))
    for bad in ("x", "5000:1000", "1e999:2e999", "1:2:3", "nan:5", "5ms:5ms", "1h:2h"):
        with pytest.raises(UsageError, match="--window"):
            parse_window(bad)


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args, msg in ((["--range", "("], "is not a regular expression"),
                      (["--range", "^nosuch/"], "matches no NVTX range holding a kernel (closest: "),
                      (["--window", "5000:1000"], "START < END"),
                      (["--window", "1e9:2e9"], "holds no GPU operation")):
        assert main(["plot", "stream-timeline", str(DEMO), "-o", str(tmp_path / "t.png"), *args]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "t.png").exists()


# ---- scale -------------------------------------------------------------------------------------


def test_column_busy_is_exact() -> None:
    rng = np.random.default_rng(0)
    start = rng.uniform(0, 1000, 5000)
    end = start + rng.exponential(3, 5000)
    end[:5] = start[:5] + 300  # kernels spanning many columns
    cat = rng.integers(0, 3, 5000)
    busy = column_busy(start, end, cat, 0.0, 10.0, 100, 3)
    edges = np.arange(101) * 10.0
    brute = np.zeros((100, 3))
    for s, e, c in zip(start, end, cat):
        brute[:, c] += np.clip(np.minimum(e, edges[1:]) - np.maximum(s, edges[:-1]), 0, None)
    assert np.allclose(busy, brute, atol=1e-6)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_synthetic_trace import generate

    out = tmp_path_factory.mktemp("syn") / "syn.sqlite"
    generate(30_000, 6_000, 600).write(out)
    return analyze(load_trace(out), [("*/cast_transpose", "*/dgrad")])


def test_big_lane_mixes_categories_per_column(synthetic: Analysis) -> None:
    d = timeline_data(synthetic)
    big = [l for l in d.lanes if l.kernels > MAX_BARS_PER_LANE]
    assert big and all(l.aggregated and l.mix is not None and len(l.start_us) == 0 for l in big)
    mix = big[0].mix
    assert mix is not None and mix.busy_us.shape == (1280, len(d.categories))
    shares = mix.busy_us / np.maximum(mix.busy_us.sum(axis=1, keepdims=True), 1e-12)
    busy_cols = mix.busy_us.sum(axis=1) > 0
    # every family keeps its share of each column: none hides the others
    assert (np.count_nonzero(shares[busy_cols] > 0.05, axis=1) >= 2).mean() > 0.9
    k = synthetic.trace.kernels
    lane = (k.device == big[0].device) & (k.stream == big[0].stream)
    assert mix.busy_us.sum() == pytest.approx(float((k.end[lane] - k.start[lane]).sum()) / 1e3, rel=1e-6)
    fig = draw_timeline(d)
    assert len(fig.axes[0].images) == len(big)


def test_many_edges_become_density_strips(synthetic: Analysis, tmp_path: Path) -> None:
    d = timeline_data(synthetic)
    assert synthetic.event_edges > MAX_ARROWS_PER_KIND
    kinds = {s.kind for s in d.strips}
    assert "event" in kinds and "unordered" in kinds
    assert not [a for a in d.arrows if a.kind in kinds]  # no line painted over the lanes for those
    ev = next(s for s in d.strips if s.kind == "event")
    n = len(event_edges(synthetic))  # edges with a kernel before the record and after the wait
    assert n > synthetic.event_edges - 5 and ev.counts.sum() == n and ev.label.startswith(f"event edges: {n:,}")
    fig = draw_timeline(d)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any(t.startswith("UNORDERED pairs:") for t in labels)
    out = save(fig, tmp_path / "s.png")
    from PIL import Image

    assert len(np.unique(np.asarray(Image.open(out).convert("RGB")).reshape(-1, 3), axis=0)) > 20


def test_zoomed_synthetic_draws_arrows_and_marks(synthetic: Analysis) -> None:
    d = timeline_data(synthetic, window=(10_000, 12_000))
    assert not any(l.aggregated for l in d.lanes)
    assert [a for a in d.arrows if a.kind == "event"] and [a for a in d.arrows if a.kind == "unordered"]
    assert d.unit == ("µs", 1.0) and d.marks


def test_nvtx_lane_aggregates_at_the_figure_width(synthetic: Analysis) -> None:
    wide, narrow = timeline_data(synthetic, width_px=1600), timeline_data(synthetic, width_px=400)
    assert wide.range_lanes[0].aggregated and narrow.range_lanes[0].aggregated
    assert len(narrow.range_lanes[0].start_us) < len(wide.range_lanes[0].start_us)


def test_short_kernel_names() -> None:
    assert short_name("void at::native::(anonymous namespace)::spin_kernel(long)") == "spin_kernel"
    assert short_name("at::cuda::(anonymous namespace)::spin_kernel(long)") == "spin_kernel"
    assert short_name("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float>>(T3)") == \
        "reduce_kernel<512, 1, ReduceOp<float>>"
    a = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"
    b = a.replace("execute_kernel", "execute_split_k_kernel")
    sa, sb = distinct_short_names([a, b])
    assert sa != sb and "split_k" in sb and len(sa) <= 56 and len(sb) <= 56


# ---- commands ----------------------------------------------------------------------------------


def test_a_run_with_pairs_all_is_drawn_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    run = tmp_path / "run"
    assert main(["trace", "import", str(DEMO), "-o", str(run), "--pairs", "all"]) == 0
    assert json.loads((run / "verdict.json").read_text())["pair_spec"] == {"mode": "all", "globs": []}
    capsys.readouterr()
    assert main(["plot", "stream-timeline", str(run), "-o", str(tmp_path / "run.png")]) == 0
    assert "8 arrows" in capsys.readouterr().out  # 4 UNORDERED pairs + 4 event edges
    assert main(["plot", "stream-timeline", str(DEMO), "--pairs", "all", "-o", str(tmp_path / "all.png")]) == 0
    assert "8 arrows" in capsys.readouterr().out
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    table = html.split("ordering verdicts")[1].split("</table>")[0]
    rows = table.split("<tr class=")[1:]
    assert sum(r.startswith("'unordered'") for r in rows) == 4 and all(r.startswith("'unordered'") for r in rows[:4])
    assert len(rows) == 200  # the first 200, UNORDERED first, not all 2,148
