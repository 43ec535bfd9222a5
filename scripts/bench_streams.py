"""Many streams, side by side: `trace analyze` (default `--pairs all`) and `plot stream-timeline` of
synthetic traces with N streams (2 kernels per stream in an NVTX range each; --events: every
stream waits on an event recorded on the previous one, a chain), each command in a child process,
wall and CPU seconds (getrusage of the child) and peak RSS; with --baseline DIR (another checkout
of tracer), the same commands there too and the ratio (a run past --timeout is shown as '>T').

Usage: python scripts/bench_streams.py [--streams 2000 10000] [--events] [--baseline DIR] [--timeout 120]
"""
from __future__ import annotations

import argparse
import os
import resource
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

    b, keys = TraceBuilder(), []
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


def timed(argv: list[str], root: Path, timeout: float) -> tuple[float, float, int] | None:
    """(wall s, CPU s, peak RSS MB) of `python -m tracer argv` run from root; None past the timeout."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "tracer", *argv], cwd=root, env=env, check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except subprocess.TimeoutExpired:
        return None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss // 1024


def fmt(r: tuple[float, float, int] | None, timeout: float) -> str:
    return f">{timeout:.0f} s wall" if r is None else f"{r[0]:7.2f} s wall {r[1]:7.2f} s CPU {r[2]:5d} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--events", action="store_true")
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracer-streams-") as tmp:
        for n in args.streams:
            path = make(n, args.events, Path(tmp) / f"s{n}.sqlite")
            for what, argv in (("analyze", ["trace", "analyze", str(path)]),
                               ("plot", ["plot", "stream-timeline", str(path), "-o", f"{tmp}/s{n}.png"])):
                here = timed(argv, ROOT, args.timeout)
                line = f"{n:6d} streams{' +events' if args.events else ''} {what:8s} this tree {fmt(here, args.timeout)}"
                if args.baseline:
                    base = timed(argv, args.baseline, args.timeout)
                    ratio = (f"x{base[0] / here[0]:.1f} faster" if base and here else
                             f">x{args.timeout / here[0]:.1f} faster" if here else "-")
                    line += f" | baseline {fmt(base, args.timeout)} | {ratio}"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
