"""racecheck on linear_backward with the project's kernel filter vs unfiltered, side by side.
Usage: python scripts/bench_sanitize.py [--tokens 512 --hidden 512 --layers 2] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sanitize-"))
    profile = tmp / "linear_backward_small.yaml"
    profile.write_text(f"schema: 1\nworkload: linear_backward\nparams: {{tokens: {args.tokens}, hidden: {args.hidden}, "
                       f"layers: {args.layers}, microbatches: 1, steps: 1}}\nsanitize: {{kernel_filter: [cast_transpose]}}\n")
    out = tmp / "run"
    subprocess.run([sys.executable, "-m", "tracer", "sanitize", "--tool", "racecheck", "--filter", "both", "--jobs", "1",
                    "-o", str(out), str(profile)], check=False)
    runs = json.loads((out / "report.json").read_text())["runs"]
    secs = {r["filter"]: r["seconds"] for r in runs}
    print(f"racecheck linear_backward {args.tokens}x{args.hidden} x{args.layers} layers: filtered {secs['on']:.1f} s, "
          f"unfiltered {secs['off']:.1f} s, ratio {secs['off'] / secs['on']:.1f}x; verdicts "
          + ", ".join(f"{r['filter']}={r['verdict']}" for r in runs))
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": secs, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
