"""The same side-stream copy from pinned memory, with the main stream waiting for it: ordered, no hazard."""
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
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.nvtx.range("use_h2d"):
            out = dst * 3
    torch.cuda.synchronize()
print("ops_h2d_wait_stream", float(out.sum()))
