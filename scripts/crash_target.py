"""A target that crashes mid-run: it launches the planted_race cast-transpose (a hazard for
racecheck), then kills itself with SIGSEGV before exiting normally."""
from __future__ import annotations

import os
import signal

import torch

from tracer.kernel.spec import Config, Variant
from tracer.kernel.launch import cast_transpose

x = torch.randn(1024, 1024, device="cuda").to(torch.bfloat16)
scale, sinv, amax = torch.ones(2, device="cuda"), torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
cast_transpose(x, scale, sinv, amax, variant=Variant.PLANTED_RACE, config=Config(16, 16))
torch.cuda.synchronize()
print("crash_target: launched, now crashing", flush=True)
os.kill(os.getpid(), signal.SIGSEGV)
