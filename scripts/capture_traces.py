"""Capture CUPTI traces (nsys-schema SQLite) of the seed workloads; regenerates tests/data/traces/.

Run on a GPU machine:  python scripts/capture_traces.py OUT_DIR
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tracer.capture.launcher import capture

TARGETS = {
    "cast_transpose_dgrad": ["cast_transpose_dgrad", "--shape", "1024x1024x1024", "--steps", "2"],
    "event_ordered_dgrad": ["event_ordered_dgrad", "--shape", "1024x1024x1024", "--steps", "2"],
    "planted_cross_stream": ["planted_cross_stream", "--shape", "4096x4096x4096", "--steps", "3"],
    "linear_backward_planted": ["linear_backward_planted"],
}


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for name, args in TARGETS.items():
        logs = out / f"{name}-logs"
        logs.mkdir(exist_ok=True)
        res = capture(["python", "-m", "tracer", "run", *args, "--no-fail-on-check"], out / f"{name}.sqlite", logs, 300)
        summary[name] = {"exit": res.returncode, "seconds": round(res.seconds, 1), "timed_out": res.timed_out}
        print(name, summary[name], flush=True)
    (out / "captures.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
