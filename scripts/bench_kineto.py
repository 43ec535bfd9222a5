"""Kineto (PyTorch profiler JSON) input at scale, side by side in one run.

A synthetic trace shaped like ../shared/fixtures/kineto/*.json.gz (the same event kinds, fields and
flow events) with N kernels on 8 streams, N/10 annotation ranges and N/100 cross-stream waits, is
written to a temporary folder; then, each in a child process pinned to 2 cores, wall seconds, CPU
seconds and peak RSS (getrusage of the child) of:
- `read_kineto` (tracer's streamed reader) and, for the ratio, `json.load` of the same file;
- `tracer trace analyze FILE --pairs GLOB` (reader + analysis, as a user runs it);
- HolisticTraceAnalysis' load + kernel launch stats + queue length summary, when a Python with
  `hta` installed is given (--hta-python; never a tracer dependency).
Usage: python scripts/bench_kineto.py [--kernels 1000000] [--hta-python PATH] [--skip-json-load] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STREAMS = 8
T0 = 1712867402348256  # microseconds, as in the fixtures
PID, TID = 3727853, 3727853
NAMES = ("cast_transpose", "dgrad", "ampere_sgemm_128x64_nn", "vectorized_elementwise_kernel")
RUNTIME = ('{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d, "ts": %d, "dur": 4, '
           '"args": {"External id": %d, "cbid": %d, "correlation": %d}}')
FLOW = '{"ph": "%s", "id": %d, "pid": %d, "tid": %d, "ts": %d, "cat": "ac2g", "name": "ac2g"%s}'
KERNEL = ('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, '
          '"queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d, "registers per thread": 122, '
          '"shared memory": 12544, "blocks per SM": 5.925926, "warps per SM": 23.703703, "grid": [8, 16, 5], '
          '"block": [128, 1, 1], "est. achieved occupancy %%": 25}}')
RANGE = '{"ph": "X", "cat": "user_annotation", "name": "step%d/%s", "pid": %d, "tid": %d, "ts": %d, "dur": %d, "args": {}}'
WAIT = ('{"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": %d, "ts": %d, "dur": 1, '
        '"args": {"External id": %d, "cuda_sync_kind": "Stream Wait Event", "wait_on_stream": %d, '
        '"wait_on_cuda_event_record_corr_id": %d, "wait_on_cuda_event_id": %d, "stream": %d, "correlation": %d, '
        '"device": 0, "context": 1}}')


def _kernel_events(k: int, corr: int, ts: int) -> list[str]:
    stream, name = 7 + k % STREAMS, NAMES[k % len(NAMES)]
    return [RUNTIME % ("cudaLaunchKernel", PID, TID, ts, k, 211, corr), FLOW % ("s", corr, PID, TID, ts, ""),
            KERNEL % (name, stream, ts + 20, 5 + k % 7, k, stream, corr), FLOW % ("f", corr, 0, stream, ts + 20, ', "bp": "e"')]


def _wait_events(k: int, corr: int, ts: int) -> list[str]:
    """cudaEventRecord on one stream, then another stream waits for it."""
    src, dst = 7 + k % STREAMS, 7 + (k + 1) % STREAMS
    return [RUNTIME % ("cudaEventRecord", PID, TID, ts, k, 135, corr),
            RUNTIME % ("cudaStreamWaitEvent", PID, TID, ts + 1, k, 147, corr + 1),
            WAIT % (dst, ts + 2, k, src, corr, k, dst, corr + 1)]


def make_trace(path: Path, kernels: int) -> None:
    corr, ts = 100, T0
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],\n'
                 '"traceEvents": [\n')
        fh.write('{"name": "process_name", "ph": "M", "ts": %d, "pid": %d, "tid": 0, "args": {"name": "python3"}}' % (T0, PID))  # noqa: UP031  # JSON braces would need doubling in an f-string
        for k in range(kernels):
            events = _kernel_events(k, corr, ts)
            if k % 10 == 0:
                events.append(RANGE % (k // 10, NAMES[k // 10 % len(NAMES)], PID, TID, ts, 300))
            if k % 100 == 99:
                events += _wait_events(k, corr + 1, ts + 25)
                corr += 2
            fh.write(",\n" + ",\n".join(events))
            corr, ts = corr + 1, ts + 30
        fh.write('\n],\n"traceName": "synthetic.json"}\n')


CHILD = """
import json, resource, sys, time
from pathlib import Path
t0, c0 = time.perf_counter(), time.process_time()
what, path = sys.argv[1], Path(sys.argv[2])
if what == "read_kineto":
    from tracer.readers.kineto_reader import read_kineto
    n = len(read_kineto(path).kernels)
elif what == "json.load":
    with open(path) as fh:
        n = sum(1 for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel")
else:
    from hta.trace_analysis import TraceAnalysis
    a = TraceAnalysis(trace_dir=str(path.parent))
    a.get_cuda_kernel_launch_stats(visualize=False)
    a.get_queue_length_summary(ranks=[0])
    n = len(a.t.get_trace(0))
print(json.dumps({"what": what, "seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "n": n}))
"""


def pinned(argv: list[str]) -> list[str]:
    return ["taskset", "-c", "0,1", *argv] if (os.cpu_count() or 1) > 2 and shutil.which("taskset") else argv


def child(python: str, what: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(pinned([python, "-c", CHILD, what, str(path)]), capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def analyze(path: Path) -> dict:
    """The CLI as a user runs it; peak RSS from getrusage(RUSAGE_CHILDREN) in a wrapper process."""
    code = ("import json, resource, subprocess, sys, time; t0 = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(json.dumps({'what': 'trace analyze', 'seconds': time.perf_counter() - t0, 'cpu_s': u.ru_utime + u.ru_stime, "
            "'peak_mb': u.ru_maxrss / 1024, 'rc': r.returncode}))")
    argv = [sys.executable, "-c", code, sys.executable, "-m", "tracer", "trace", "analyze", str(path), "--pairs", "*/cast_transpose:*/dgrad"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(pinned(argv), capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--hta-python", help="a Python with HolisticTraceAnalysis installed (a separate venv)")
    ap.add_argument("--skip-json-load", action="store_true")
    ap.add_argument("--skip-analyze", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-kineto-"))
    try:
        path = tmp / "rank-0.json"
        make_trace(path, args.kernels)
        print(f"{args.kernels} kernels, {STREAMS} streams: {path.stat().st_size / 1e6:.0f} MB of JSON")
        rows = [child(sys.executable, "read_kineto", path)]
        if not args.skip_json_load:
            rows.append(child(sys.executable, "json.load", path))
        if not args.skip_analyze:
            rows.append(analyze(path))
        if args.hta_python:
            rows.append(child(args.hta_python, "hta", path))
        base = rows[0]
        for r in rows:
            print(f"{r['what']:<14} {r['seconds']:7.1f} s wall {r['cpu_s']:7.1f} s CPU {r['peak_mb']:7.0f} MB peak  "
                  f"CPU x{r['cpu_s'] / base['cpu_s']:.2f} of read_kineto")
        if args.json:
            Path(args.json).write_text(json.dumps({"kernels": args.kernels, "bytes": path.stat().st_size, "rows": rows}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
