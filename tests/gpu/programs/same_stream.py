"""Producer and consumer on one stream: stream order, no hazard."""
import torch

SPIN = 20_000_000
s1 = torch.cuda.Stream()
a = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"), torch.cuda.stream(s1):
        with torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a @ a
        with torch.cuda.nvtx.range("consume"):
            c = b * 2
    torch.cuda.synchronize()
print("same_stream", float(c.sum()))
