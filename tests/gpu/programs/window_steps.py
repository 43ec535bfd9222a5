"""A training-style loop of 4 steps, each in an NVTX range `stepN` and ended by a device synchronize,
each with the same planted race (a side stream writes `buf` after a spin, the main stream reads it with
no wait: RAW). Under `trace run --memory-steps 1:3` only steps 1 and 2 are judged: RAW x2, and the
operations of steps 0 and 3 are counted as not judged (outside the window)."""
import torch

SPIN = 20_000_000
side = torch.cuda.Stream()
buf = torch.zeros(1 << 20, device="cuda")
torch.cuda.synchronize()
for s in range(4):
    torch.cuda.nvtx.range_push(f"step{s}")
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN)
        buf.add_(1.0)
    out = buf * 2  # no wait on side: RAW
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print("window_steps", float(out.sum()))
