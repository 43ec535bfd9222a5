"""In-place ops on two views of one tensor that overlap by a quarter, on two streams (WAW on the
overlap only)."""
import torch

SPIN = 20_000_000
N = 1 << 21
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
big = torch.zeros(2 * N, device="cuda")
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("left"):
            torch.cuda._sleep(SPIN)
            big[: N + N // 4].add_(1)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("right"):
            big[N:].mul_(2)
    torch.cuda.synchronize()
print("inplace_view_overlap", float(big.sum()))
