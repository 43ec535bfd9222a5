"""`tracer demo`: the whole product on sample data captured on an H200 (shipped in tracer/data/demo):
ordering verdicts, the sanitizer matrix, a campaign, their pictures, a Perfetto export and the
HTML report. No GPU, no Nsight binary."""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracer import resources
from tracer.artifact import TraceRun, open_campaign, open_sanitize
from tracer.analysis.pairs import PairSpec

if TYPE_CHECKING:
    from tracer.campaign.stats import CellStats

DEMO_DIR = resources.DEMO_DIR
DEMO_PAIRS = PairSpec.of((("*/cast_transpose", "*/dgrad"), ("*/cast_transpose", "*/wgrad")))
FILES = ("timeline.png", "verdicts.png", "ablation.png", "report.html", "trace.perfetto.json", "diff.html", "diff.png")
DIFF_DIR = DEMO_DIR / "diff"


def default_output() -> Path:
    """A fresh folder in the system's temp directory: never inside the source tree or the cwd."""
    return Path(tempfile.mkdtemp(prefix="tracer-demo-"))


def campaign_lines(cells: Sequence[CellStats]) -> list[str]:
    return [f"  {c.label:<24} {c.failures:>4}/{c.trials:<5} rate {c.rate:.3f}  95% [{c.lower:.4f}, {c.upper:.4f}]"
            + (" (one-sided)" if c.one_sided else "") for c in cells]


def diff_demo(out: Path) -> list[str]:
    """The seed workload compared: the planted race against its fix (hazards gone, time), and the
    fence-free kernel against device_before_atomic (time only; Nsight Compute durations)."""
    from tracer.app.diff import diff_paths
    from tracer.views.plots.diff import draw_diff
    from tracer.views.plots.timeline import save
    from tracer.views.report.diff_html import write_diff_html
    from tracer.views.report.diff_text import format_diff

    fix = diff_paths(DIFF_DIR / "planted_cross_stream.sqlite", DIFF_DIR / "event_ordered_dgrad.sqlite")
    profile = DIFF_DIR / "fence_variants"
    fence = diff_paths(profile, profile, targets=("none", "device_before_atomic"))
    save(draw_diff(fix), out / "diff.png")
    write_diff_html(fix, out / "diff.html")
    return ["\n== diff: planted_cross_stream -> event_ordered_dgrad (CUPTI captures with memory access sets, H200)",
            format_diff(fix),
            "\n== diff: fence variant none -> device_before_atomic (Nsight Compute, 2 launches each, H200)",
            format_diff(fence)]


def run_demo(out: Path | None = None) -> str:
    """Write the demo's files into out (default: a new temp folder); return the text to print."""
    from tracer.views.plots.ablation import draw_ablation
    from tracer.views.plots.perfetto import write_perfetto
    from tracer.views.plots.timeline import draw_timeline, save
    from tracer.views.plots.verdicts import draw_verdicts
    from tracer.views.report.build import build_report, trace_analysis
    from tracer.sanitize.selftest import format_matrix
    from tracer.views.trace_text import format_analysis
    from tracer.views.timeline_layout import timeline_data

    out = out or default_output()
    out.mkdir(parents=True, exist_ok=True)
    trace_file = DEMO_DIR / "linear_backward_planted.sqlite"
    trace = TraceRun(path=trace_file, trace_file=trace_file, run_dir=None, pair_spec=DEMO_PAIRS, environment=None)
    sanitize, campaign = open_sanitize(DEMO_DIR / "sanitize"), open_campaign(DEMO_DIR / "campaign.json")
    a = trace_analysis(trace)
    runs = list(sanitize.runs)
    text = ["== ordering verdicts (CUPTI capture of linear_backward with a planted cross-stream dgrad, H200)",
            format_analysis(a),
            "\n== sanitizer matrix (compute-sanitizer on the planted workloads, H200)",
            format_matrix(runs, list(dict.fromkeys(r.workload for r in runs))),
            "\n== campaign (fence variants and the planted race on cast_transpose_dgrad, H200)",
            *campaign_lines(campaign.cells)]
    save(draw_timeline(timeline_data(a, range_regex="^step1/")), out / "timeline.png")
    save(draw_verdicts(runs), out / "verdicts.png")
    save(draw_ablation(list(campaign.cells)), out / "ablation.png")
    write_perfetto(a, out / "trace.perfetto.json")
    build_report([trace, sanitize, campaign], "tracer demo (sample data from an H200)", "^step1/").write(out / "report.html")
    text += diff_demo(out)
    text.append(f"\nwrote {', '.join(FILES)} to {out}/ (open {out / 'report.html'})")
    return "\n".join([*text, *NEXT_STEPS])


NEXT_STEPS = (
    "\nnext, on your own program (on a machine with an NVIDIA GPU):",
    "  tracer trace run --memory -- python train.py     # ordering verdicts and memory hazards between streams",
    "  tracer sanitize --tool all -- python train.py    # compute-sanitizer's four tools, one verdict each",
    "or on a trace made elsewhere (no GPU needed):",
    "  tracer trace analyze profile.sqlite              # an nsys SQLite export (or trace import FILE.nsys-rep)",
    "  tracer sanitize import memcheck.xml              # compute-sanitizer output (--xml --save memcheck.xml)",
)

