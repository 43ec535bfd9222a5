"""Two ranks sharing the one GPU (cuda:0), backend gloo (NCCL refuses two ranks on one device):
torchrun --nproc-per-node 2. DDP over CUDA tensors: gloo copies each gradient bucket to the host on a
stream of its own (ordered after the current stream by an event), reduces on the CPU, copies back,
and the current stream waits for it: no hazard. `--planted` adds, after the steps, a dist.all_reduce
of a tensor a side stream wrote (after a spin) with no wait: gloo's device-to-host copy reads it
unordered, RAW, once per iteration (2) on each rank, and its host-to-device copy back writes it
unordered with the same write (WAW, the same missing wait)."""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

torch.cuda.set_device(0)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 64)).cuda()
ddp = DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x = torch.randn(32, 512, device="cuda") + rank
for s in range(3):
    with torch.cuda.nvtx.range(f"step{s}"):
        loss = ddp(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
if "--planted" in sys.argv:
    side = torch.cuda.Stream()
    buf = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()  # the fill above is not part of the planted race
    for i in range(2):
        with torch.cuda.nvtx.range(f"planted{i}"):
            with torch.cuda.stream(side):
                torch.cuda._sleep(20_000_000)
                buf.mul_(2.0)
            dist.all_reduce(buf)  # no wait on side
        torch.cuda.synchronize()
    print("planted", rank, float(buf.sum()))
print("gloo_ddp", rank, float(loss))
dist.destroy_process_group()
