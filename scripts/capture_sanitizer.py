"""Capture real compute-sanitizer output (XML and text) for every tool x planted workload, the
clean workload and a target that crashes mid-run; regenerates tests/data/sanitizer/.

Run on a GPU machine:  python scripts/capture_sanitizer.py OUT_DIR [--jobs 8]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracer import proc
from tracer.sanitize.argv import SanitizeOptions, Tool, build_argv

SMALL = ["--shape", "128x128x128", "--steps", "1"]
WORKLOADS = {
    "clean": ["-m", "tracer", "run", "cast_transpose_dgrad", *SMALL],
    "planted_race": ["-m", "tracer", "run", "planted_race", *SMALL],
    "planted_oob": ["-m", "tracer", "run", "planted_oob", *SMALL],
    "planted_uninit": ["-m", "tracer", "run", "planted_uninit", *SMALL],
    "planted_barrier": ["-m", "tracer", "run", "planted_barrier", *SMALL],
    "crash": ["scripts/crash_target.py"],
}
# Small enough to commit: one 128x128 tile, few printed records, the project's kernel filter
# (API errors are still reported: they are not kernel records).
OPTIONS = {"print_limit": 20, "include_kernels": ("kns=cast_transpose",)}


def one(binary: str, out: Path, tool: Tool, name: str, timeout: float) -> dict:
    target = [sys.executable, *WORKLOADS[name]]
    if WORKLOADS[name][0] == "-m":
        target.append("--no-fail-on-check")
    stem = out / f"{tool.value}-{name}"
    argv = build_argv(binary, SanitizeOptions(tool=tool, xml_path=stem.with_suffix(".xml"), **OPTIONS), target)
    res = proc.run(argv, timeout=timeout, stdout_path=stem.with_suffix(".log"), stderr_path=stem.with_suffix(".stderr"))
    return {"tool": tool.value, "workload": name, "exit": res.returncode, "timed_out": res.timed_out,
            "seconds": round(res.seconds, 1), "argv": argv}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=400)
    args = ap.parse_args()
    binary = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(t, w) for w in WORKLOADS for t in Tool]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda tw: one(binary, args.out, tw[0], tw[1], args.timeout), jobs))
    for mode in ("hazard", "analysis"):  # racecheck's two report modes, XML and text, unfiltered
        stem = args.out / f"racecheck-{mode}-planted_race"
        opts = SanitizeOptions(tool=Tool.RACECHECK, xml_path=stem.with_suffix(".xml"), print_limit=20, racecheck_report=mode)
        proc.run(build_argv(binary, opts, [sys.executable, *WORKLOADS["planted_race"], "--no-fail-on-check"]),
                 timeout=args.timeout, stdout_path=stem.with_suffix(".log"), stderr_path=stem.with_suffix(".stderr"))
    (args.out / "index.json").write_text(json.dumps(results, indent=1))
    for r in results:
        print(f"{r['tool']:<10} {r['workload']:<16} exit={r['exit']} timed_out={r['timed_out']} {r['seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
