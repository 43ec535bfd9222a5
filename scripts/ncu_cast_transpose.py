"""Target for Nsight Compute: a few cast-transpose launches of one shape and config.
Usage: ncu --clock-control none -k cast_transpose --metrics ... python scripts/ncu_cast_transpose.py 8192x8192 16/16"""
from __future__ import annotations

import sys

import torch

from tracer.kernel.spec import Config
from tracer.kernel.launch import cast_transpose

rows, cols = (int(v) for v in sys.argv[1].split("x"))
cfg = Config.parse(sys.argv[2]) if len(sys.argv) > 2 else None
x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
scale = torch.tensor([2.0, 0.0], device="cuda")
sinv, amax = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
for _ in range(3):
    cast_transpose(x, scale, sinv, amax, config=cfg)
torch.cuda.synchronize()
