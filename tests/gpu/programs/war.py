"""A writer on another stream overwrites a tensor that is still being read (WAR)."""
import torch

SPIN = 20_000_000
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
b = torch.randn(1 << 22, device="cuda")
out = torch.empty_like(b)
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("read"):
            torch.cuda._sleep(SPIN)
            torch.mul(b, 2, out=out)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("overwrite"):
            b.fill_(float(step))  # no wait for the reader
    torch.cuda.synchronize()
print("war", float(out.sum()))
