"""Trace benchmarks, side by side in one run.

CPU: `tracer trace analyze` (the CLI path, --json) on synthetic nsys-schema traces made by
     scripts/make_synthetic_trace.py (NVTX ranges = kernels/10, event waits = kernels/100):
     - default options and `--pairs all`, 1M kernels on 8 streams; default options, 3M kernels on 8 streams;
     - `--pairs '*/cast_transpose:*/dgrad'`, 1M kernels on 4 streams (the glob path);
     - hazards (default with memory tables), 1M kernels on 8 streams, 100k allocations, 1,000 host syncs;
     - ops: the same with 500k copies and memsets among the kernels (hazards judge them too);
     each in a child process pinned to 2 cores: wall and CPU seconds, peak RSS. Beside each, the
     floors on the same file: the SQLite CLI (GROUP BY stream and kernel name, joined to StringIds)
     and tracer's own SELECTs run one after another on one connection (the statements its reader
     runs, on all its connections, fetchall only). --cpu-repeats N runs each case N times (alternating
     with --baseline's) and reports the median and the range.
GPU (--gpu): linear_backward untraced, under tracer's CUPTI backend, and under torch.profiler,
     alternating, timed inside the process after a warm-up step.
     --baseline DIR runs each case again with DIR's tracer (an older checkout) beside it.
Usage: python scripts/bench_trace.py [--cases default,all,3M,glob,hazards,ops] [--baseline DIR] [--cpu-repeats 1] [--gpu] [--repeats 3]
       [--json OUT.json]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(tempfile.gettempdir())
LIMITS = {"default": (10, 1536), "all": (10, 1536), "3M": (30, 3072), "glob": (None, None), "hazards": (10, 1536),
          "ops": (10, 1536)}

# (file name, make_synthetic_trace.py options)
TRACES = {
    "1M-8s": ("tracer-synthetic-1M-8s.sqlite", ["--kernels", "1000000", "--streams", "8"]),
    "3M-8s": ("tracer-synthetic-3M-8s.sqlite", ["--kernels", "3000000", "--ranges", "300000", "--waits", "30000", "--streams", "8"]),
    "1M-4s": ("tracer-synthetic-1M-4s.sqlite", ["--kernels", "1000000", "--streams", "4"]),
    "1M-8s-memory": ("tracer-synthetic-1M-8s-memory.sqlite", ["--kernels", "1000000", "--streams", "8", "--memory",
                                                             "--allocations", "100000", "--host-syncs", "1000"]),
    "1M-8s-ops": ("tracer-synthetic-1M-8s-ops.sqlite", ["--kernels", "1000000", "--copies", "500000", "--streams", "8",
                                                       "--memory", "--allocations", "100000", "--host-syncs", "1000"]),
}
CASES = {  # name: (trace, extra CLI arguments)
    "default": ("1M-8s", []),
    "all": ("1M-8s", ["--pairs", "all"]),
    "3M": ("3M-8s", []),
    "glob": ("1M-4s", ["--pairs", "*/cast_transpose:*/dgrad"]),
    "hazards": ("1M-8s-memory", []),
    "ops": ("1M-8s-ops", []),  # hazards over 1M kernels + 500k copies and memsets
}

CHILD = """
import contextlib, io, json, os, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from tracer.cli import main
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    code = main(["trace", "analyze", *sys.argv[1:], "--json"])
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "exit": code,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

FETCH = """
import json, resource, sqlite3, sys, time
from pathlib import Path
statements = json.loads(Path(sys.argv[2]).read_text())
t0, c0 = time.perf_counter(), time.process_time()
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = 0
for sql in statements:
    rows += len(con.execute(sql).fetchall())
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "rows": rows,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

RECORD_SQL = """
import json, sqlite3, sys
from pathlib import Path
seen = []
real = sqlite3.connect
def keep(s):  # the reader's fetches, from every thread
    if s.lstrip().upper().startswith("SELECT"):
        seen.append(s)
def connect(*a, **k):
    con = real(*a, **k)
    con.set_trace_callback(keep)
    return con
sqlite3.connect = connect
from tracer.readers.load import load_trace
load_trace(Path(sys.argv[1]))
Path(sys.argv[2]).write_text(json.dumps(seen))
"""

GROUP_BY = ("SELECT k.streamId, s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName GROUP BY k.streamId, k.demangledName;")


def pinned(argv: list[str]) -> list[str]:
    return ["taskset", "-c", "0,1", *argv] if (os.cpu_count() or 1) > 2 and shutil.which("taskset") else argv


def env(root: Path = ROOT) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def trace_file(key: str) -> Path:
    name, options = TRACES[key]
    path = CACHE / name
    if not path.is_file():
        print(f"making {path} ({' '.join(options)}) ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_synthetic_trace.py"), str(path), *options],
                       check=True, env=env())
    return path


def _json_child(argv: list[str], root: Path = ROOT) -> dict:
    out = subprocess.run(pinned(argv), capture_output=True, text=True, check=True, env=env(root), cwd=root)  # `-c` puts cwd first
    return json.loads(out.stdout.strip().splitlines()[-1])


def floors(path: Path) -> dict:
    """The SQLite CLI's GROUP BY and tracer's own SELECTs fetched, on the same file."""
    out: dict = {}
    if shutil.which("sqlite3"):
        t0 = time.perf_counter()
        subprocess.run(pinned(["sqlite3", f"file:{path}?mode=ro", GROUP_BY]), capture_output=True, check=True)
        out["sqlite_cli_s"] = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        statements = Path(tmp) / "sql.json"
        subprocess.run([sys.executable, "-c", RECORD_SQL, str(path), str(statements)], check=True, env=env(), cwd=ROOT)
        fetched = _json_child([sys.executable, "-c", FETCH, str(path), str(statements)])
    out["fetch_s"], out["fetch_cpu_s"], out["fetch_rows"] = fetched["seconds"], fetched["cpu_seconds"], fetched["rows"]
    return out


def bench_case(name: str, baseline: Path | None, repeats: int = 1) -> dict:
    key, extra = CASES[name]
    path = trace_file(key)
    floor = floors(path)
    argv = [sys.executable, "-c", CHILD, str(path), *extra]
    runs, base_runs = [], []
    for _ in range(repeats):  # alternate, so drift in the machine's load hits both alike
        runs.append(_json_child(argv))
        if baseline is not None:
            base_runs.append(_json_child(argv, baseline))
    result = _median(runs) | floor | {"trace": key, "args": extra}
    if baseline is not None:
        base = result["baseline"] = _median(base_runs)
        print(f"{name:<8} baseline {baseline}: {base['seconds']:.2f} s {_spread(base)}(cpu {base['cpu_seconds']:.2f}) peak "
              f"{base['peak_mb']:.0f} MB; this tree is {base['seconds'] / result['seconds']:.2f}x faster", flush=True)
    seconds, mb = LIMITS[name]
    ratio = result["seconds"] / result["fetch_s"]
    cli = f", {result['seconds'] / result['sqlite_cli_s']:.1f}x the SQLite CLI ({result['sqlite_cli_s']:.2f} s)" \
        if "sqlite_cli_s" in result else ""
    print(f"{name:<8} {key:<13} {' '.join(extra) or '(default)':<34} {result['seconds']:6.2f} s {_spread(result)}"
          f"(cpu {result['cpu_seconds']:.2f}) "
          f"peak {result['peak_mb']:5.0f} MB | {ratio:.1f}x tracer's SELECTs run in turn ({result['fetch_s']:.2f} s, "
          f"{result['fetch_rows']} rows){cli}" + (f" | limits {seconds} s, {mb} MB" if seconds else ""), flush=True)
    return result


def _median(runs: list[dict]) -> dict:
    """The run with the median wall time, with every run's seconds beside it."""
    mid = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]
    return mid | {"all_seconds": [r["seconds"] for r in runs]}


def _spread(result: dict) -> str:
    seconds = result["all_seconds"]
    return f"[{min(seconds):.2f}-{max(seconds):.2f}, {len(seconds)} runs] " if len(seconds) > 1 else ""


def _timed(argv: list[str], env_: dict | None = None) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, env=env_, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def bench_gpu(repeats: int) -> dict:
    from tracer.capture.cupti import child_env, find_libcupti

    target = [str(ROOT / "scripts" / "bench_target.py")]
    cupti_cmd = [sys.executable, "-m", "tracer.capture.cupti_child", str(CACHE / "bench.sqlite"), "--", *target]
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
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    ap.add_argument("--baseline", type=Path, help="an older checkout to run the same cases with, side by side")
    ap.add_argument("--cpu-repeats", type=int, default=1, help="runs of each CPU case (median reported)")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    result: dict = {}
    if not args.no_cpu:
        unknown = [c for c in args.cases.split(",") if c not in CASES]
        if unknown:
            ap.error(f"unknown case(s) {', '.join(unknown)} (allowed: {', '.join(CASES)})")
        print(f"cores: {'0,1 (taskset)' if pinned(['x']) != ['x'] else os.cpu_count()}", flush=True)
        result["analysis"] = {c: bench_case(c, args.baseline, args.cpu_repeats) for c in args.cases.split(",")}
    if args.gpu:
        result["gpu"] = bench_gpu(args.repeats)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
