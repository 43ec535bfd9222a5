"""Many streams, side by side: `trace analyze` (default `--pairs all`) and `plot stream-timeline` of
synthetic traces with N streams (2 kernels per stream in an NVTX range each, with events by
--cases: see make()), written as an Nsight Systems export (the schema tracer's CUPTI captures also
write, read by the same reader) or as a PyTorch profiler (Kineto) JSON; each command in a child
process, wall and CPU seconds (getrusage of the child) and peak RSS; with --baseline DIR (another
checkout of tracer), the same commands there too, up to --baseline-streams streams, and the ratio
(a run past --timeout is shown as '>T').

Usage: python scripts/bench_streams.py [--streams 2000 10000] [--cases plain chain ...] [--formats sqlite kineto]
       [--baseline DIR] [--baseline-streams 10000] [--timeout 120]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


CASES = ("plain", "chain", "chain-first", "fan-out", "fan-in")


def make(n: int, case: str, out: Path) -> Path:
    """N streams of 2 kernels, each stream's in an NVTX range, with events by case: plain (none);
    chain (each stream, after its kernels, waits on an event recorded on the stream before); chain-first
    (each stream waits on the previous stream's event before its kernels: every kernel is ordered
    after every kernel of the streams before it, clocks grow with the chain); fan-out (one event on
    the first stream, waited on by every other stream before its kernels); fan-in (every stream
    records after its kernels, the first stream waits on them all and runs 2 more kernels)."""
    from make_synthetic_trace import TraceBuilder

    b, keys = (KinetoBuilder() if out.suffix == ".json" else TraceBuilder()), []
    root = None
    for s in range(n):
        b.push(f"r{s}")
        if case == "chain-first" and s:
            b.wait(100 + s, b.record(100 + s - 1))
        if case == "fan-out" and root is not None:
            b.wait(100 + s, root)
        b.launch(100 + s, name=f"k{s % 7}")
        b.launch(100 + s, name=f"k{s % 5}")
        if case == "chain" and s:
            b.wait(100 + s, b.record(100 + s - 1))
        if case == "fan-out" and s == 0:
            root = b.record(100)
        if case == "fan-in" and s:
            keys.append(b.record(100 + s))
        b.pop()
    if case == "fan-in":
        b.push("join")
        for key in keys:
            b.wait(100, key)
        b.launch(100, name="join")
        b.launch(100, name="join")
        b.pop()
    return b.write(out)


class KinetoBuilder:
    """The subset of TraceBuilder that make() uses, writing Kineto JSON (the events of
    scripts/bench_kineto.py: launches with their kernels, user annotations, cudaEventRecord and
    cudaStreamWaitEvent with its "Stream Wait Event" cuda_sync event)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.corr, self.ts = 100, 1712867402348256
        self.open: list[tuple[str, int]] = []
        self.recorded: dict[int, int] = {}  # key (the record's correlation id) -> its stream

    def _next(self) -> tuple[int, int]:
        self.corr, self.ts = self.corr + 1, self.ts + 10
        return self.corr, self.ts

    def push(self, name: str) -> None:
        self.open.append((name, self.ts))

    def pop(self) -> None:
        from bench_kineto import PID, RANGE, TID
        name, ts = self.open.pop()
        self.events.append(RANGE.replace("step%d/%s", "%s") % (name, PID, TID, ts, self.ts - ts + 1))

    def launch(self, stream: int, name: str) -> int:
        from bench_kineto import KERNEL, PID, RUNTIME, TID
        corr, ts = self._next()
        self.events += [RUNTIME % ("cudaLaunchKernel", PID, TID, ts, corr, 211, corr),
                        KERNEL % (name, stream, ts + 20, 5, corr, stream, corr)]
        return corr

    def record(self, stream: int) -> int:
        from bench_kineto import PID, RUNTIME, TID
        corr, ts = self._next()
        self.events.append(RUNTIME % ("cudaEventRecord", PID, TID, ts, corr, 135, corr))
        self.recorded[corr] = stream
        return corr

    def wait(self, stream: int, key: int) -> int:
        from bench_kineto import PID, RUNTIME, TID, WAIT
        corr, ts = self._next()
        self.events += [RUNTIME % ("cudaStreamWaitEvent", PID, TID, ts, corr, 147, corr),
                        WAIT % (stream, ts + 2, corr, self.recorded[key], key, key, stream, corr)]
        return corr

    def write(self, out: Path) -> Path:
        head = ('{"schemaVersion": 1, "distributedInfo": {"rank": 0}, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],\n'
                '"traceEvents": [\n')
        out.write_text(head + ",\n".join(self.events) + '\n],\n"traceName": "synthetic.json"}\n')
        return out


def timed(argv: list[str], root: Path, timeout: float) -> tuple[float, float, int] | None:
    """(wall s, CPU s, peak RSS MB) of `python -m tracer argv` run from root, from the child's own
    rusage (os.wait4); None past the timeout."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "tracer", *argv], cwd=root, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:
            child.kill()
            os.wait4(child.pid, 0)
            return None
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[:2]} failed in {root} (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def fmt_result(r: tuple[float, float, int] | None, timeout: float) -> str:
    return f">{timeout:.0f} s wall" if r is None else f"{r[0]:7.2f} s wall {r[1]:7.2f} s CPU {r[2]:5d} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--cases", nargs="+", choices=CASES, default=["plain"])
    ap.add_argument("--formats", nargs="+", choices=("sqlite", "kineto"), default=["sqlite"])
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with")
    ap.add_argument("--baseline-streams", type=int, default=10**9, help="run the baseline only up to this many streams")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the start", flush=True)
    with tempfile.TemporaryDirectory(prefix="tracer-streams-") as tmp:
        for fmt in args.formats:
            for case in args.cases:
                for n in args.streams:
                    path = make(n, case, Path(tmp) / f"s{n}-{case}.{'sqlite' if fmt == 'sqlite' else 'json'}")
                    for what, argv in (("analyze", ["trace", "analyze", str(path)]),
                                       ("plot", ["plot", "stream-timeline", str(path), "-o", f"{tmp}/s{n}.png"])):
                        here = timed(argv, ROOT, args.timeout)
                        line = f"{fmt:6s} {case:11s} {n:6d} streams {what:8s} this tree {fmt_result(here, args.timeout)}"
                        if args.baseline and n <= args.baseline_streams:
                            base = timed(argv, args.baseline, args.timeout)
                            ratio = (f"x{base[0] / here[0]:.1f} wall, x{base[1] / here[1]:.1f} CPU" if base and here else
                                     f">x{args.timeout / here[0]:.1f} wall" if here else "-")
                            line += f" | baseline {fmt_result(base, args.timeout)} | {ratio}"
                        print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
