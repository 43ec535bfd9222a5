"""Stream timeline of the synthetic 1,000,000-kernel trace: analysis, aggregation and PNG render
time, in a child process pinned to 2 cores. Usage: python scripts/bench_plot.py [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_trace import pinned  # noqa: E402

RENDER = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from tracer.plots.timeline import draw_timeline, save
from tracer.trace.analyze import analyze
from tracer.trace.load import load_trace
from tracer.trace.timeline import timeline_data
a = analyze(load_trace(Path(sys.argv[1])), [("*/cast_transpose", "*/dgrad")])
t1 = time.perf_counter()
data = timeline_data(a)
save(draw_timeline(data), Path(sys.argv[2]))
t2 = time.perf_counter()
print(json.dumps({"analysis_s": t1 - t0, "render_s": t2 - t1, "total_s": t2 - t0,
                  "bars": sum(len(l.start_us) for l in data.lanes), "kernels": len(a.trace.kernels)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    trace = Path(tempfile.gettempdir()) / "tracer-synthetic-1M.sqlite"
    if not trace.is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(trace)], check=True)
    out = Path(tempfile.gettempdir()) / "tracer-synthetic-timeline.png"
    res = subprocess.run(pinned([sys.executable, "-c", RENDER, str(trace), str(out)]), capture_output=True, text=True, check=True)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"timeline of {r['kernels']} kernels ({r['bars']} bars after aggregation): analysis {r['analysis_s']:.1f} s + "
          f"render {r['render_s']:.1f} s = {r['total_s']:.1f} s (limit 20 s); {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
