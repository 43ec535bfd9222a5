"""Two writers of one tensor on two streams, unordered (WAW)."""
import torch

SPIN = 20_000_000
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
b = torch.empty(1 << 22, device="cuda")
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("write1"):
            torch.cuda._sleep(SPIN)
            b.fill_(1.0)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("write2"):
            b.fill_(2.0)
    torch.cuda.synchronize()
print("waw", float(b.sum()))
