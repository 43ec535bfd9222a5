"""DDP with NCCL (one rank: the only GPU lent), small gradient buckets, 3 training steps, then an
explicit all_reduce of a tensor written on the current stream: every collective is ordered by
c10d's own stream handling, so no hazard."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
ddp = DistributedDataParallel(model, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x = torch.randn(64, 1024, device="cuda")
for s in range(3):
    with torch.cuda.nvtx.range(f"step{s}"):
        loss = ddp(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
with torch.cuda.nvtx.range("explicit"):
    t = x.sum(0) * 2
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    y = t + 1
torch.cuda.synchronize()
print("collective_ddp", float(loss), float(y.sum()))
dist.destroy_process_group()
