"""DDP training of a small model for 3 steps, one process per rank: run it with
`torchrun --nproc-per-node 2 ddp_train.py`. NCCL when every rank has its own GPU, else gloo (two
ranks sharing one GPU). --kill-rank R makes rank R SIGKILL itself in the middle of step 1
(the failure case of issue #16: the other rank's trace must survive); --kill-after S makes it
synchronise the device and wait S seconds first (its work complete: tracer's flushes hand its
records over, so its partial trace holds its kernels; the other rank waits in its next all-reduce)."""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--kill-rank", type=int, default=-1)
    ap.add_argument("--kill-after", type=float, default=0.0)
    args = ap.parse_args()
    rank, local, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    gpus = torch.cuda.device_count()
    backend = "nccl" if gpus >= world else "gloo"
    device = torch.device("cuda", local % gpus)
    torch.cuda.set_device(device)
    dist.init_process_group(backend)
    torch.manual_seed(rank)
    model = DDP(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device), device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1024, device=device)
    for step in range(args.steps):
        with torch.cuda.nvtx.range(f"step{step}"):
            with torch.cuda.nvtx.range("forward"):
                loss = model(x).square().mean()
            with torch.cuda.nvtx.range("backward"):
                loss.backward()
                if step == 1 and rank == args.kill_rank:
                    if args.kill_after:
                        torch.cuda.synchronize()
                        time.sleep(args.kill_after)
                    os.kill(os.getpid(), signal.SIGKILL)
            with torch.cuda.nvtx.range("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    print(f"ddp_train rank {rank}/{world} backend {backend} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
