"""Target for Nsight Compute: a few cast-transpose launches of one shape, config and variant.
Usage: python scripts/ncu_cast_transpose.py 8192x8192 [16/16] [--variant device_before_atomic] [--launches 3]
  tracer profile --kernel cast_transpose -- python scripts/ncu_cast_transpose.py 4096x4096 --variant none"""
from __future__ import annotations

import argparse

import torch

from tracer.kernel.launch import cast_transpose
from tracer.kernel.spec import Config, parse_variant

ap = argparse.ArgumentParser()
ap.add_argument("shape", help="ROWSxCOLS")
ap.add_argument("config", nargs="?", help="LOAD/STORE bytes (default: the heuristic's pick)")
ap.add_argument("--variant", default="none", help="kernel variant (see `tracer kernels list`)")
ap.add_argument("--launches", type=int, default=3)
args = ap.parse_args()
rows, cols = (int(v) for v in args.shape.split("x"))
cfg = Config.parse(args.config) if args.config else None
variant = parse_variant(args.variant)
x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
scale = torch.tensor([2.0, 0.0], device="cuda")
sinv, amax = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
for _ in range(args.launches):
    cast_transpose(x, scale, sinv, amax, config=cfg, variant=variant)
torch.cuda.synchronize()
