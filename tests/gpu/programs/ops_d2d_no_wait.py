"""A buffer filled on a third stream is copied device to device on the main stream with no wait
(RAW: the copy reads what the fill kernel writes)."""
import torch

SPIN = 20_000_000
third = torch.cuda.Stream()
buf = torch.empty(1 << 20, device="cuda")
out = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
for it in range(2):
    with torch.cuda.nvtx.range(f"it{it}"):
        with torch.cuda.stream(third), torch.cuda.nvtx.range("fill"):
            torch.cuda._sleep(SPIN)
            buf.fill_(float(it))
        with torch.cuda.nvtx.range("d2d"):
            out.copy_(buf)  # no wait on `third`: the race
    torch.cuda.synchronize()
print("ops_d2d_no_wait", float(out.sum()))
