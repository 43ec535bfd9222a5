"""Pictures and reports: assertions on the data handed to the figures and on their artists, files
written at the requested size, HTML escaping, the Perfetto export and the demo."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import matplotlib
import pytest

from tests.conftest import shared_fixture
from tracer.cli import main
from tracer.views.plots.timeline import draw_timeline, save
from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace
from tracer.views.timeline_layout import aggregate, timeline_data

DEMO = Path(__file__).resolve().parent.parent / "tracer" / "data" / "demo"
PAIRS = [("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")]


@pytest.fixture(scope="module")
def planted():
    return analyze(load_trace(DEMO / "linear_backward_planted.sqlite"), PAIRS)


def test_timeline_data_lanes_bars_and_arrows(planted) -> None:
    d = timeline_data(planted, window=(0, float("inf")))
    assert [(l.device, l.stream) for l in d.lanes] == [(0, 7), (0, 13)]
    # lanes draw every GPU operation: the main stream's 2,536 kernels and 218 copies and memsets
    assert [l.kernels for l in d.lanes] == [2754, 4] and not any(l.aggregated for l in d.lanes)
    assert [l.label for l in d.lanes] == ["GPU0 stream 7 (2,754 operations)", "GPU0 stream 13 (4 kernels)"]
    side = d.lanes[1]
    assert [d.categories[c] for c in side.category] == ["dgrad"] * 4
    assert all(n.startswith("nvjet_sm90") for n in side.names)
    unordered = [a for a in d.arrows if a.kind == "unordered"]
    assert len(unordered) == 4 and all(a.lane0 == 0 and a.lane1 == 1 for a in unordered)
    assert all("UNORDERED" in a.label for a in unordered)
    events = [a for a in d.arrows if a.kind == "event"]
    assert len(events) == 4 and all(a.lane0 == 1 and a.lane1 == 0 for a in events)
    assert d.range_lanes and len(d.range_lanes[0].names) == 134


def test_range_and_window_filters(planted) -> None:
    step1 = timeline_data(planted, range_regex="^step1/")
    assert 0 < step1.lanes[0].kernels < 2536 and step1.lanes[1].kernels == 2
    assert all(n.startswith("step1/") for n in step1.range_lanes[0].names)
    lo, hi = step1.window_us
    win = timeline_data(planted, window=(lo, lo + (hi - lo) / 4))
    assert win.lanes[0].kernels < step1.lanes[0].kernels + 100
    assert win.window_us[1] <= lo + (hi - lo) / 4


def test_figure_artists(planted) -> None:
    fig = draw_timeline(timeline_data(planted, range_regex="^step1/"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()][-2:] == ["GPU0 stream 7 (1,336 operations)", "GPU0 stream 13 (2 kernels)"]
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    reds = [a for a in arrows if matplotlib.colors.to_hex(a.arrow_patch.get_edgecolor()) == "#d62728"]
    assert len(reds) == 2 and len(arrows) == 4
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"cast_transpose", "dgrad", "wgrad", "check", "UNORDERED pair", "event edge (record -> wait)"} <= set(legend)
    assert "other" not in legend  # step1's kernels all have a family: "other" is not drawn, so not listed


def test_big_nvtx_lanes_are_aggregated_with_outliers_kept() -> None:
    import numpy as np

    start = np.arange(100_000, dtype=float) * 10
    end = start + 5
    end[777] = start[777] + 50_000  # one outlier
    depth = (np.arange(100_000) // 7) % 3
    st, wd, dp = aggregate(start, end, depth, pixel=1000.0)
    assert len(st) < 3_500 and (wd >= 50_000).sum() >= 1
    assert st.min() == 0 and (st + wd).max() == end.max()


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_files_written_nonblank_at_the_requested_size(tmp_path: Path, planted, suffix: str) -> None:
    out = save(draw_timeline(timeline_data(planted), size=(12, 5)), tmp_path / f"t{suffix}")
    assert out.stat().st_size > 10_000
    if suffix == ".png":
        from PIL import Image

        img = Image.open(out)
        assert img.size == (1200, 500)
        import numpy as np

        assert len(np.unique(np.asarray(img.convert("RGB")).reshape(-1, 3), axis=0)) > 20  # not blank
    else:
        text = out.read_text()
        assert text.startswith("<?xml") and "864pt" in text  # 12 in x 72 pt


def test_cli_plots_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "stream-timeline", str(DEMO / "linear_backward_planted.sqlite"), "-o", str(tmp_path / "t.png"),
                 "--range", "^step0/", "--pairs", "*/cast_transpose:*/dgrad"]) == 0
    assert "2 stream lanes" in capsys.readouterr().out
    assert main(["plot", "stream-timeline", str(DEMO / "linear_backward_planted.sqlite"), "-o", str(tmp_path / "t.jpg")]) == 2
    assert "must end in .png or .svg" in capsys.readouterr().err
    assert main(["plot", "stream-timeline", str(DEMO / "linear_backward_planted.sqlite"), "--window", "x"]) == 2
    assert main(["plot", "verdicts", str(DEMO / "sanitize"), "-o", str(tmp_path / "v.png")]) == 0
    assert main(["plot", "ablation", str(DEMO / "campaign.json"), "-o", str(tmp_path / "a.png")]) == 0
    assert all((tmp_path / n).stat().st_size > 5_000 for n in ("t.png", "v.png", "a.png"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"variants": {"none": {"trials": "x"}}}')
    assert main(["plot", "ablation", str(bad)]) == 6  # a bad input file


def test_report_escapes_names_from_traces(tmp_path: Path) -> None:
    """A kernel named <script>alert(1)</script> must not become markup."""
    trace = tmp_path / "evil.sqlite"
    shutil.copyfile(shared_fixture("nsys", "torch_small.sqlite"), trace)
    con = sqlite3.connect(trace)
    con.execute("UPDATE StringIds SET value = '<script>alert(1)</script>' WHERE id = "
                "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)")
    con.commit()
    con.close()
    out = tmp_path / "r.html"
    assert main(["report", str(trace), str(DEMO / "sanitize"), str(DEMO / "campaign.json"), "-o", str(out)]) == 0
    html = out.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    assert "http://" not in html and "https://" not in html  # self-contained
    assert html.count("data:image/png;base64,") >= 3


def test_perfetto_export(tmp_path: Path, planted) -> None:
    out = tmp_path / "t.json"
    assert main(["trace", "export", "--perfetto", str(DEMO / "linear_backward_planted.sqlite"), "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    ev = data["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert len(kernels) == 2540 and {e["tid"] for e in kernels} == {7, 13}
    copies = [e for e in ev if e.get("cat") in ("memcpy", "memset")]
    assert len(copies) == 218 and {e["tid"] for e in copies} == {7} and copies[0]["name"].startswith("[mem")
    assert {e["args"]["name"] for e in ev if e.get("name") == "thread_name"} == {"stream 7", "stream 13"}
    flows = [e for e in ev if e.get("cat") == "event"]
    assert len(flows) == 8 and {e["ph"] for e in flows} == {"s", "f"}
    assert len({e["id"] for e in flows}) == 4
    assert sum(1 for e in ev if e.get("cat") == "nvtx") == 134


def test_demo_runs_without_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "-o", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "UNORDERED" in out and "planted_cross_stream" in out and "selftest" not in out
    for name in ("timeline.png", "verdicts.png", "ablation.png", "report.html", "trace.perfetto.json"):
        assert (tmp_path / "d" / name).stat().st_size > 1_000


def test_nsys_fixture_timeline(tmp_path: Path) -> None:
    a = analyze(load_trace(shared_fixture("nsys", "h100_2gpu_1s.sqlite")))
    d = timeline_data(a)
    assert [l.kernels for l in d.lanes] == [1721 + 463, 1721 + 463] and len(d.range_lanes) >= 2  # kernels and copies
    save(draw_timeline(d), tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 10_000


@pytest.mark.parametrize("name", ["torch_small.sqlite", "smoke_2025.5.2.sqlite"])
def test_perfetto_rebases_a_trace_without_nvtx(name: str) -> None:
    from tracer.views.plots.perfetto import perfetto_events

    a = analyze(load_trace(shared_fixture("nsys", name)))
    assert len(a.trace.ranges.start) == 0 and len(a.trace.kernels) > 0
    ts = [e["ts"] for e in perfetto_events(a) if e.get("cat") in ("kernel", "memcpy", "memset")]
    span = (int(a.trace.kernels.end.max()) - int(a.trace.kernels.start.min())) / 1e3
    assert min(ts) == 0 and max(ts) <= span  # microseconds from the first GPU operation, not from the clock's origin
