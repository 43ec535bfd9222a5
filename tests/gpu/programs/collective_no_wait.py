"""A collective launched with no wait on the stream that wrote its buffer: a side stream writes `buf`
(after a spin), then `all_reduce(buf)` is called from the main stream. ProcessGroupNCCL orders its
stream after the current (main) stream only, so NCCL reads `buf` with no event ordering it after the
side stream's write: RAW, once per iteration (2). NCCL with one rank (the only GPU lent): AVG makes
NCCL launch its one-rank reduce kernel; all_gather_into_tensor copies on the NCCL stream."""
import os

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
SPIN = 20_000_000
side = torch.cuda.Stream()
buf = torch.ones(1 << 20, device="cuda")
out = torch.empty(1 << 20, device="cuda")
dist.all_reduce(buf, op=dist.ReduceOp.AVG)  # NCCL's communicator and stream made outside the iterations
torch.cuda.synchronize()
for i in range(2):
    with torch.cuda.nvtx.range(f"iter{i}"):
        with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
            torch.cuda._sleep(SPIN)
            buf.mul_(2.0)
        with torch.cuda.nvtx.range("allreduce"):
            dist.all_reduce(buf, op=dist.ReduceOp.AVG)  # no wait on side
    torch.cuda.synchronize()
with torch.cuda.nvtx.range("gather"):
    with torch.cuda.stream(side), torch.cuda.nvtx.range("write"):
        torch.cuda._sleep(SPIN)
        buf.add_(1.0)
    with torch.cuda.nvtx.range("allgather"):
        dist.all_gather_into_tensor(out, buf)
torch.cuda.synchronize()
print("collective_no_wait", float(buf.sum()), float(out.sum()))
dist.destroy_process_group()
