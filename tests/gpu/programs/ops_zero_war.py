"""The main stream reads a tensor; a side stream zeroes it with no wait (WAR)."""
import torch

SPIN = 20_000_000
side = torch.cuda.Stream()
x = torch.randn(1 << 20, device="cuda")
torch.cuda.synchronize()
for it in range(2):
    with torch.cuda.nvtx.range(f"it{it}"):
        with torch.cuda.nvtx.range("read"):
            torch.cuda._sleep(SPIN)
            y = x * 2
        with torch.cuda.stream(side), torch.cuda.nvtx.range("zero"):
            x.zero_()  # no side.wait_stream(main): the race
    torch.cuda.synchronize()
    x.normal_()
    torch.cuda.synchronize()
print("ops_zero_war", float(y.sum()))
