"""Trace benchmarks, side by side in one run.

CPU:  analysis of a synthetic 1,000,000-kernel nsys-schema trace (100,000 NVTX ranges, 10,000
      cross-stream waits): wall time and peak memory, in a child process pinned to 2 cores.
GPU (--gpu): linear_backward untraced, under tracer's CUPTI backend, and under torch.profiler,
      alternating, timed inside the process after a warm-up step.
Usage: python scripts/bench_trace.py [--gpu] [--repeats 3] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANALYZE = """
import resource, sys, time
from pathlib import Path
t0 = time.perf_counter()
from tracer.trace.analyze import analyze
from tracer.trace.load import load_trace
a = analyze(load_trace(Path(sys.argv[1])), [("*/cast_transpose", "*/dgrad")])
import json
print(json.dumps({"seconds": time.perf_counter() - t0, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kernels": len(a.trace.kernels), "pairs": a.pair_counts}))
"""


def pinned(argv: list[str]) -> list[str]:
    return ["taskset", "-c", "0,1", *argv] if os.cpu_count() and os.cpu_count() > 2 and _has("taskset") else argv


def _has(tool: str) -> bool:
    from shutil import which

    return which(tool) is not None


def bench_analysis() -> dict:
    path = Path(tempfile.gettempdir()) / "tracer-synthetic-1M.sqlite"
    if not path.is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(path)], check=True)
    out = subprocess.run(pinned([sys.executable, "-c", ANALYZE, str(path)]), capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"synthetic analysis: {result['kernels']} kernels in {result['seconds']:.2f} s, peak {result['peak_mb']:.0f} MB "
          f"(limits 10 s, 1536 MB) {'cores 0,1' if pinned(['x']) != ['x'] else ''}")
    return result


def _timed(argv: list[str], env: dict | None = None) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def bench_gpu(repeats: int) -> dict:
    from tracer.capture.cupti import child_env, find_libcupti

    target = [str(ROOT / "scripts" / "bench_target.py")]
    cupti_cmd = [sys.executable, "-m", "tracer.capture.cupti_child", str(Path(tempfile.gettempdir()) / "bench.sqlite"), "--", *target]
    times: dict[str, list[float]] = {"untraced": [], "cupti": [], "torch.profiler": []}
    for _ in range(repeats):  # alternate, so drift hits all three alike
        times["untraced"].append(_timed([sys.executable, *target]))
        times["cupti"].append(_timed(cupti_cmd, child_env(find_libcupti())))
        times["torch.profiler"].append(_timed([sys.executable, *target, "--torch-profiler"]))
    med = {k: statistics.median(v) for k, v in times.items()}
    for k in ("cupti", "torch.profiler"):
        print(f"{k:<15} {med[k]:.4f} s vs untraced {med['untraced']:.4f} s: overhead {100 * (med[k] / med['untraced'] - 1):+.1f}%")
    return {"times": times, "median": med,
            "overhead_pct": {k: 100 * (med[k] / med["untraced"] - 1) for k in ("cupti", "torch.profiler")}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    result = {}
    if not args.no_cpu:
        result["analysis"] = bench_analysis()
    if args.gpu:
        result["gpu"] = bench_gpu(args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
