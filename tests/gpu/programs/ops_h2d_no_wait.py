"""Data loading on a side stream: a non_blocking copy from pinned memory into a device tensor, then
the main stream uses it with no wait (RAW: the kernel reads what the copy may still be writing)."""
import torch

SPIN = 20_000_000
side = torch.cuda.Stream()
host = torch.randn(1 << 20).pin_memory()
dst = torch.empty(1 << 20, device="cuda")
torch.cuda.synchronize()
for it in range(2):
    with torch.cuda.nvtx.range(f"it{it}"):
        with torch.cuda.stream(side), torch.cuda.nvtx.range("h2d"):
            torch.cuda._sleep(SPIN)
            dst.copy_(host, non_blocking=True)
        with torch.cuda.nvtx.range("use_h2d"):
            out = dst * 3  # no torch.cuda.current_stream().wait_stream(side): the race
    torch.cuda.synchronize()
print("ops_h2d_no_wait", float(out.sum()))
