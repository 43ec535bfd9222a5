"""A Triton kernel on another stream reads a torch tensor with no wait (RAW, "may")."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale2(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, 2.0 * tl.load(x + i, mask=m), mask=m)


SPIN = 20_000_000
N = 1 << 22
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(N, device="cuda")
y = torch.empty_like(a)
scale2[(triton.cdiv(N, 1024),)](a, y, N, BLOCK=1024)  # compiled before the timed part
torch.cuda.synchronize()
for step in range(2):
    with torch.cuda.nvtx.range(f"step{step}"):
        with torch.cuda.stream(s1), torch.cuda.nvtx.range("produce"):
            torch.cuda._sleep(SPIN)
            b = a * 3
        with torch.cuda.stream(s2), torch.cuda.nvtx.range("consume"):
            scale2[(triton.cdiv(N, 1024),)](b, y, N, BLOCK=1024)
    torch.cuda.synchronize()
print("triton_no_wait", float(y.sum()))
