"""Benchmark target: linear_backward after one warm-up step, timed over N steps in-process.
Prints one JSON line {"seconds": ...}. --torch-profiler wraps the timed steps in torch.profiler."""
from __future__ import annotations

import argparse
import contextlib
import json
import time

import torch

from tracer.workloads.engine import Engine
from tracer.workloads.spec import load_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="linear_backward")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--torch-profiler", action="store_true")
    args = ap.parse_args()
    engine = Engine(load_workload(args.workload).with_overrides(steps=args.steps + 1))
    engine.step(0)
    torch.cuda.synchronize()
    prof = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
            if args.torch_profiler else contextlib.nullcontext())
    with prof:
        t0 = time.perf_counter()
        for s in range(1, args.steps + 1):
            engine.step(s)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "steps": args.steps}))


if __name__ == "__main__":
    main()
