"""A reader on another stream with no wait: it reads the GEMM result while it is being written (RAW)."""
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
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            c = b * 2  # no s2.wait_stream(s1): the race
    torch.cuda.synchronize()
print("raw_no_wait", float(c.sum()))
