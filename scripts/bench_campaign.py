"""Campaign throughput on one GPU, side by side: trials/s of the campaign loop (checks on the
device, sampled rows, one read-back per batch) against the raw pipeline (the same kernels launched
back to back with no checking).
Usage: python scripts/bench_campaign.py [--profile fence_ablation] [--trials 200] [--json OUT.json]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from tracer.campaign.profile import load_campaign
from tracer.campaign.trials import _engine, run_chunk
from tracer.workloads.engine import Engine


def raw_rate(engine: Engine, trials: int, steps: int) -> float:
    engine.step(0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for t in range(trials):
        for j in range(steps):
            engine.step(t * steps + j)
    torch.cuda.synchronize()
    return trials / (time.perf_counter() - t0)


def campaign_rate(spec, cell, trials: int, batch: int) -> float:  # type: ignore[no-untyped-def]
    run_chunk(spec, 1, cell, list(range(batch)), "0", "bench")  # warm-up: compile, cuBLAS handles
    t0 = time.perf_counter()
    for start in range(0, trials, batch):
        run_chunk(spec, 1, cell, list(range(start, min(trials, start + batch))), "0", "bench")
    return trials / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="fence_ablation")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    spec = load_campaign(args.profile)
    cell = spec.cells()[0]
    checked = _engine(spec, cell)
    raw = Engine(checked.spec, checks=frozenset(), flush_each_step=False)
    steps, batch = spec.data["steps_per_trial"], spec.data["batch"]
    rates = {"raw": [], "campaign": []}
    for _ in range(3):  # alternate, so drift hits both alike
        rates["raw"].append(raw_rate(raw, args.trials, steps))
        rates["campaign"].append(campaign_rate(spec, cell, args.trials, batch))
    best = {k: max(v) for k, v in rates.items()}
    ratio = best["campaign"] / best["raw"]
    print(f"{cell.label} {cell.shape}: raw pipeline {best['raw']:.1f} trials/s, campaign loop {best['campaign']:.1f} "
          f"trials/s = {100 * ratio:.1f}% of raw (goal >= 80%); checks {sorted(c.value for c in spec.checks)}, "
          f"sample_rows {spec.data['sample_rows']}, batch {batch}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rates": rates, "best": best, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
