"""Stream timeline of synthetic 1,000,000- and 3,000,000-kernel traces (scripts/make_synthetic_trace.py:
4 streams, NVTX ranges = kernels/10, event waits = kernels/100, pairs `*/cast_transpose:*/dgrad`).
Each size runs in a child process pinned to 2 cores and reports, side by side: load + analysis (not
the timeline's work), timeline data, drawing + PNG, and peak RSS. The PNGs are kept for looking at.
Usage: python scripts/bench_plot.py [--sizes 1000000,3000000] [--json OUT.json] [--out DIR]"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_trace import pinned

LIMIT_S = 30.0  # issue #17: a 3M-kernel timeline in at most 30 s
RENDER = """
import json, resource, sys, time
from pathlib import Path
clock = lambda: (time.perf_counter(), time.process_time())
w0, c0 = clock()
from tracer.views.plots.timeline import draw_timeline, save
from tracer.analysis.analyze import analyze
from tracer.readers.load import load_trace
from tracer.views.timeline_layout import timeline_data
a = analyze(load_trace(Path(sys.argv[1])), [("*/cast_transpose", "*/dgrad")])
w1, c1 = clock()
data = timeline_data(a)
w2, c2 = clock()
save(draw_timeline(data), Path(sys.argv[2]))
w3, c3 = clock()
print(json.dumps({"analysis_s": w1 - w0, "data_s": w2 - w1, "render_s": w3 - w2, "timeline_s": w3 - w1,
                  "analysis_cpu_s": c1 - c0, "data_cpu_s": c2 - c1, "render_cpu_s": c3 - c2, "timeline_cpu_s": c3 - c1,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kernels": len(a.trace.kernels), "mixed_lanes": sum(l.aggregated for l in data.lanes),
                  "arrows": len(data.arrows), "strips": [s.label for s in data.strips]}))
"""


def synthetic(kernels: int) -> Path:
    path = Path(tempfile.gettempdir()) / f"tracer-synthetic-{kernels}.sqlite"
    if not path.is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(path),
                        "--kernels", str(kernels), "--ranges", str(kernels // 10), "--waits", str(kernels // 100)],
                       check=True)
    return path


def measure(kernels: int, out_dir: Path) -> dict:
    png = out_dir / f"tracer-timeline-{kernels}.png"
    res = subprocess.run(pinned([sys.executable, "-c", RENDER, str(synthetic(kernels)), str(png)]),
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1]) | {"png": str(png)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,3000000", help="kernel counts, comma-separated")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()), help="where the PNGs go")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = [measure(int(n), args.out) for n in args.sizes.split(",")]
    print("seconds, wall (CPU); the timeline is the data for the picture plus drawing and writing the PNG")
    print(f"{'kernels':>10} {'load+analysis':>16} {'timeline data':>14} {'draw+PNG':>14} {'timeline':>14} "
          f"{'vs analysis':>11} {'peak MB':>8}")
    for r in rows:
        cells = [f"{r[k + '_s']:.2f} ({r[k + '_cpu_s']:.2f})" for k in ("analysis", "data", "render", "timeline")]
        print(f"{r['kernels']:>10,} {cells[0]:>16} {cells[1]:>14} {cells[2]:>14} {cells[3]:>14} "
              f"{r['timeline_cpu_s'] / r['analysis_cpu_s']:>10.2f}x {r['peak_mb']:>8.0f}")
        print(f"{'':>10} {r['mixed_lanes']} lanes mixed per column, {r['arrows']} arrows, strips: "
              f"{'; '.join(r['strips']) or 'none'}; {r['png']}")
    worst = max(r["timeline_s"] for r in rows)
    print(f"slowest timeline (data + drawing): {worst:.1f} s (limit {LIMIT_S:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if worst <= LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
