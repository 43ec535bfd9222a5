"""FSDP2 (`fully_shard`) as users write it: each Linear its own FSDP unit, then the root; NCCL at
world size 1 (the one GPU lent: run directly, or under torchrun --nproc-per-node 1); AdamW, 3 steps
in NVTX ranges `stepN`. FSDP's all-gather and reduce-scatter streams, its copy-in/copy-out and the
optimizer are ordered by FSDP's own events and waits: no hazard. `--planted` adds, after the
steps, the user's own all_reduce on a side stream of a tensor the compute stream just wrote, with no
wait_stream: RAW, once per iteration (2)."""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", 0))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 128)).cuda()
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda")
for s in range(3):
    with torch.cuda.nvtx.range(f"step{s}"):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
torch.cuda.synchronize()
if "--planted" in sys.argv:
    side = torch.cuda.Stream()
    t = torch.zeros(1 << 20, device="cuda")
    dist.all_reduce(t)  # the communicator made outside the iterations
    torch.cuda.synchronize()
    for i in range(2):
        with torch.cuda.nvtx.range(f"planted{i}"):
            torch.cuda._sleep(20_000_000)
            t.add_(1.0)  # written on the compute (current) stream
            with torch.cuda.stream(side):  # no side.wait_stream(current): NCCL orders after `side` only
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
        torch.cuda.synchronize()
    print("planted", float(t.sum()))
print("fsdp_train", float(loss))
dist.destroy_process_group()
