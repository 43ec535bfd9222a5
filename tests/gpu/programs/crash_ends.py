"""61 kernels in NVTX ranges, a device synchronisation, then an ending chosen by argv[1] (issue #32):
normal, exception, os_exit, segv (a fault in C), abort, sigkill, hang, loop (work until killed)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import torch

how = sys.argv[1] if len(sys.argv) > 1 else "normal"
x = torch.ones(256, 256, device="cuda")
for step in range(20):
    torch.cuda.nvtx.range_push(f"step {step}")
    x = x * 1.0001  # 3 kernels a step (+ the ones() fill): 61
    x = x + 0.5
    x = torch.relu(x)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"crash_ends: 61 kernels ran, now {how}", flush=True)
if how == "exception":
    raise RuntimeError("planted failure after the work")
if how == "os_exit":
    os._exit(0)
if how == "segv":
    ctypes.string_at(0)
if how == "abort":
    os.abort()
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "hang":
    torch.cuda.nvtx.range_push("hung here")
    time.sleep(600)
if how == "loop":
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        x = torch.relu(x * 0.999)
        torch.cuda.synchronize()
        time.sleep(0.05)
