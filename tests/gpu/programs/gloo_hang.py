"""Two ranks on ONE GPU with gloo (NCCL refuses two ranks on one GPU): each step runs kernels and
an all-reduce in NVTX ranges; rank 1 skips step 3's all-reduce and waits, so rank 0 hangs in it.
`trace run --timeout` stops both: the verdict names each rank and where its streams stood."""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(1024, device="cuda")
for step in range(6):
    torch.cuda.nvtx.range_push(f"compute step {step}")
    x = torch.relu(x * 1.001 + 0.1)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    if step == 3 and rank == 1:
        torch.cuda.nvtx.range_push("rank 1 skipped the all-reduce of step 3")
        print("rank 1: skipping the all-reduce of step 3", flush=True)
        time.sleep(600)
    torch.cuda.nvtx.range_push(f"allreduce step {step}")
    dist.all_reduce(x)
    torch.cuda.nvtx.range_pop()
print(f"rank {rank} done", os.getpid(), flush=True)
