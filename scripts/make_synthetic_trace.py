"""Generate a synthetic trace in the nsys export schema: N kernels on several streams, NVTX ranges
named like the seed workloads, cross-stream event record -> wait pairs, and a launch record per
kernel. Usage: python scripts/make_synthetic_trace.py OUT.sqlite [--kernels 1000000] [--ranges 100000] [--waits 10000]
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from tracer.capture.nsys_schema import TraceRecords, write_sqlite

STREAMS = (7, 13, 14, 15)


def generate(kernels: int, ranges: int, waits: int, seed: int = 0) -> TraceRecords:
    rnd = random.Random(seed)
    rec = TraceRecords(pid=4242)
    tid = 4242
    per_range = max(1, kernels // ranges)
    t, corr = 1_000_000, 1
    names = ("cast_transpose", "dgrad", "wgrad", "amax_update")
    wait_every = max(1, kernels // max(waits, 1))
    mid = 0
    for i in range(kernels):
        if i % per_range == 0 and mid < ranges:
            if mid:
                rec.markers.append((4, t, mid, tid, "", "tracer"))
            mid += 1
            step, layer = divmod(mid // len(names), 64)
            rec.markers.append((2, t, mid, tid, f"step{step}/layer{layer}/mb0/{names[mid % len(names)]}", "tracer"))
        stream = STREAMS[0] if (i // per_range) % 3 else STREAMS[1 + i % 3]
        rec.apis.append((t, t + 2_000, 1, tid, corr, "cuLaunchKernel", 0))
        dur = rnd.randint(2_000, 20_000)
        rec.kernels.append((t + 5_000, t + 5_000 + dur, 0, 1, stream, corr, "cast_transpose" if i % 2 else "nvjet_sm90_tst",
                            256, 1, 1, 256, 1, 1, 40, 34_000, 0, 0, 0))
        corr += 1
        t += 3_000
        if i % wait_every == wait_every - 1 and len(rec.syncs) < waits:
            src, dst = STREAMS[0], STREAMS[1 + (i % 3)]
            rec.apis.append((t, t + 500, 1, tid, corr, "cudaEventRecord", 0))
            rec.events.append((0, 0, 1, src, corr, 1000 + len(rec.syncs), corr))
            corr += 1
            rec.apis.append((t + 600, t + 900, 1, tid, corr, "cudaStreamWaitEvent", 0))
            rec.syncs.append((t + 600, t + 900, 1, dst, corr, 2, 1000 + len(rec.syncs), corr - 1))
            corr += 1
            t += 1_000
    rec.markers.append((4, t, mid, tid, "", "tracer"))
    return rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--ranges", type=int, default=100_000)
    ap.add_argument("--waits", type=int, default=10_000)
    args = ap.parse_args()
    write_sqlite(generate(args.kernels, args.ranges, args.waits), args.out, producer="synthetic")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
