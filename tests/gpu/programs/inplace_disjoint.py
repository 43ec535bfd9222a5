"""In-place ops on the two halves of one tensor, on two streams: disjoint bytes, no hazard."""
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
            big[:N].add_(1)
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("right"):
            big[N:].mul_(2)
    torch.cuda.synchronize()
print("inplace_disjoint", float(big.sum()))
