"""`tracer diff` of two 1M-kernel traces against `tracer trace analyze` of one, side by side (and
`trace analyze --explain` of one, for what the time explanation adds).

Two synthetic nsys-schema traces made by scripts/make_synthetic_trace.py (1M kernels on 8 streams,
100k NVTX ranges, 10k event waits; seeds 0 and 1, so the two differ), each command run in a child
process (--json to /dev/null), alternating, pinned to cores 0,1 where there are more: wall and CPU
seconds, peak RSS, and the ratios diff / analyze of A (the goal, issue 28: within 2x on both) and
diff / (analyze of A + analyze of B), what the comparison adds to the two analyses.
Usage: python scripts/bench_diff.py [--repeats 3] [--kernels 1000000] [--dir /tmp] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import contextlib, json, os, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from tracer.cli import main
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    code = main([*sys.argv[1:], "--json"])
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "exit": code,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def pinned(argv: list[str]) -> list[str]:
    return ["taskset", "-c", "0,1", *argv] if (os.cpu_count() or 1) > 2 and shutil.which("taskset") else argv


def trace(folder: Path, kernels: int, seed: int) -> Path:
    path = folder / f"tracer-diff-{kernels}-8s-seed{seed}.sqlite"
    if not path.is_file():
        print(f"making {path} ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(path), "--kernels",
                        str(kernels), "--streams", "8", "--seed", str(seed)], check=True, env=env())
    return path


def child(argv: list[str]) -> dict:
    out = subprocess.run(pinned([sys.executable, "-c", CHILD, *argv]), capture_output=True, text=True, env=env(), cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--json")
    args = ap.parse_args()
    a, b = trace(args.dir, args.kernels, 0), trace(args.dir, args.kernels, 1)
    load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average {load[0]:.1f} at the start (CPU seconds are the figure to trust on a "
          "loaded machine)", flush=True)
    runs: dict[str, list[dict]] = {"analyze": [], "diff": [], "explain": [], "analyze_b": []}
    for _ in range(args.repeats):  # alternate, so drift in the machine's load hits all alike
        runs["analyze"].append(child(["trace", "analyze", str(a)]))
        runs["diff"].append(child(["diff", str(a), str(b)]))
        runs["explain"].append(child(["trace", "analyze", str(a), "--explain"]))
        runs["analyze_b"].append(child(["trace", "analyze", str(b)]))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("seconds", "cpu_seconds", "peak_mb")} for k, v in runs.items()}
    for k, m in med.items():
        spread = ", ".join(f"{r['seconds']:.2f}" for r in runs[k])
        print(f"{k:<9} {m['seconds']:6.2f} s [{spread}] (cpu {m['cpu_seconds']:.2f} s) peak {m['peak_mb']:5.0f} MB", flush=True)
    ratio = {m: med["diff"][m] / med["analyze"][m] for m in ("seconds", "cpu_seconds", "peak_mb")}
    print(f"diff / analyze: wall {ratio['seconds']:.2f}x, cpu {ratio['cpu_seconds']:.2f}x, peak memory "
          f"{ratio['peak_mb']:.2f}x (goal: within 2x)")
    both = {m: med["diff"][m] / (med["analyze"][m] + med["analyze_b"][m]) for m in ("seconds", "cpu_seconds")}
    print(f"diff / (analyze A + analyze B): wall {both['seconds']:.2f}x, cpu {both['cpu_seconds']:.2f}x (what the comparison "
          "adds to the two analyses it holds; under 1: less than the start-up it saves)")
    ex = {m: med["explain"][m] / med["analyze"][m] for m in ("seconds", "cpu_seconds", "peak_mb")}
    print(f"analyze --explain / analyze: wall {ex['seconds']:.2f}x, cpu {ex['cpu_seconds']:.2f}x, peak memory {ex['peak_mb']:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "median": med, "ratio": ratio, "of_both": both, "load": load}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
