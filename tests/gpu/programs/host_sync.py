"""The consumer on another stream runs after torch.cuda.synchronize(): host-synchronized, no hazard."""
import torch

SPIN = 20_000_000
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a @ a
        torch.cuda.synchronize()
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            c = b * 2
    torch.cuda.synchronize()
print("host_sync", float(c.sum()))
